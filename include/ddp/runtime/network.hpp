#pragma once
// The network interfaces of a host and which of them MPI and NCCL would use: what `doctor` shows,
// because the classic multi-node failure is a job that hangs at start while NCCL or Open MPI's TCP
// transport tries an interface the other hosts cannot reach (docker0, virbr0, a second NIC).
//
// Everything below except list_interfaces() is pure, so the rules are unit-tested.
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::runtime {

// One IPv4 address of an interface.
struct NetInterface {
  std::string name;     // "eth0"
  std::string address;  // "10.0.0.5"
  int prefix_len = 32;  // 24 for a /24
  bool up = true;
  bool loopback = false;
};

// This host's IPv4 interface addresses (getifaddrs), in the kernel's order. Throws SystemError when
// they cannot be listed.
std::vector<NetInterface> list_interfaces();

// "10.0.0.0/24" for 10.0.0.5/24; "" when the address does not parse.
std::string subnet_of(const NetInterface& i);
// Whether `address` (dotted quad) lies in `cidr` ("10.0.0.0/24"). False when either does not parse.
bool address_in_subnet(const std::string& address, const std::string& cidr);

// NCCL_SOCKET_IFNAME's matching rule: a comma-separated list of name prefixes; a leading '^'
// inverts the whole list (names matching none of them), a leading '=' makes the prefixes exact
// names. "" matches nothing.
bool nccl_ifname_matches(const std::string& name, const std::string& spec);

// The interfaces NCCL's socket transport and bootstrap would use, best first, as NCCL chooses
// them: those NCCL_SOCKET_IFNAME selects when it is set; otherwise InfiniBand (ib*) interfaces,
// else any but docker*, lo and virbr*, else docker*, else lo.
std::vector<std::string> nccl_interfaces(const std::vector<NetInterface>& ifs,
                                         const std::string& nccl_socket_ifname);

// The interfaces Open MPI's TCP transport (btl tcp) would use: btl_tcp_if_include when set (names
// or CIDR subnets), otherwise all but those btl_tcp_if_exclude names (default "127.0.0.1/8,sppp",
// which leaves out loopback).
std::vector<std::string> mpi_tcp_interfaces(const std::vector<NetInterface>& ifs,
                                            const std::string& if_include,
                                            const std::string& if_exclude);

// What one host reports: its name, its interfaces and the variables that steer the choice.
struct HostNetwork {
  std::string host;
  std::vector<NetInterface> interfaces;
  std::string nccl_socket_ifname;  // NCCL_SOCKET_IFNAME ("" when unset)
  std::string mpi_if_include;      // OMPI_MCA_btl_tcp_if_include
  std::string mpi_if_exclude;      // OMPI_MCA_btl_tcp_if_exclude
};

struct NetworkVerdict {
  std::vector<std::string> details;         // per host: interfaces, NCCL's and MPI's choice
  std::vector<std::string> warnings;        // risky but not fatal, each with the variable to set
  std::vector<std::string> errors;          // the job cannot communicate as configured
  std::vector<std::string> shared_subnets;  // IPv4 subnets every host has (docker/virbr left out)
};

// The job's hosts (one entry per distinct host). One host: nothing to cross-check (its ranks talk
// through shared memory). Several: they must share a subnet on a real interface (else an error);
// NCCL picking interfaces off that subnet or different names on different hosts, and Open MPI
// trying interfaces off it, are warnings that suggest NCCL_SOCKET_IFNAME and
// OMPI_MCA_btl_tcp_if_include values that pin the traffic to the shared subnet.
NetworkVerdict analyze_network(const std::vector<HostNetwork>& hosts);

}  // namespace ddp::runtime
