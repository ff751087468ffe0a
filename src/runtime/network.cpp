#include "ddp/runtime/network.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "ddp/error.hpp"

namespace ddp::runtime {
namespace {

std::optional<std::uint32_t> parse_ipv4(const std::string& s) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::uint32_t mask_of(int prefix_len) {
  if (prefix_len <= 0) return 0;
  if (prefix_len >= 32) return 0xffffffffu;
  return ~((1u << (32 - prefix_len)) - 1u);
}

std::string format_ipv4(std::uint32_t host_order) {
  in_addr a{};
  a.s_addr = htonl(host_order);
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// docker0, virbr0: bridges that exist with the same subnet on every host but connect nothing.
bool is_virtual_bridge(const std::string& name) {
  return starts_with(name, "docker") || starts_with(name, "virbr");
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// An Open MPI if_include/if_exclude element: an interface name, or a CIDR subnet.
bool mpi_element_matches(const NetInterface& i, const std::string& element) {
  if (element.find('/') != std::string::npos) return address_in_subnet(i.address, element);
  return i.name == element;
}

// Whether interface `name` of `ifs` has an address in one of `subnets`.
bool on_subnets(const std::vector<NetInterface>& ifs, const std::string& name,
                const std::vector<std::string>& subnets) {
  for (const auto& i : ifs)
    if (i.name == name)
      for (const auto& s : subnets)
        if (address_in_subnet(i.address, s)) return true;
  return false;
}

std::string describe_interfaces(const std::vector<NetInterface>& ifs) {
  std::string out;
  for (const auto& i : ifs) {
    if (!out.empty()) out += ", ";
    out += i.name + " " + i.address + "/" + std::to_string(i.prefix_len);
    if (!i.up) out += " (down)";
  }
  return out.empty() ? "no IPv4 interface" : out;
}

}  // namespace

std::vector<NetInterface> list_interfaces() {
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0)
    throw SystemError(std::string("getifaddrs (listing network interfaces) failed: ") +
                      std::strerror(errno));
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(head, &freeifaddrs);
  std::vector<NetInterface> out;
  for (const ifaddrs* a = head; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    NetInterface i;
    i.name = a->ifa_name ? a->ifa_name : "?";
    i.address =
        format_ipv4(ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr));
    if (a->ifa_netmask) {
      const std::uint32_t m =
          ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
      i.prefix_len = __builtin_popcount(m);
    }
    i.up = (a->ifa_flags & IFF_UP) != 0;
    i.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(i);
  }
  return out;
}

std::string subnet_of(const NetInterface& i) {
  const auto a = parse_ipv4(i.address);
  if (!a || i.prefix_len < 0 || i.prefix_len > 32) return "";
  return format_ipv4(*a & mask_of(i.prefix_len)) + "/" + std::to_string(i.prefix_len);
}

bool address_in_subnet(const std::string& address, const std::string& cidr) {
  const auto slash = cidr.find('/');
  if (slash == std::string::npos) return false;
  const auto a = parse_ipv4(address);
  const auto net = parse_ipv4(cidr.substr(0, slash));
  int len = -1;
  try {
    std::size_t used = 0;
    len = std::stoi(cidr.substr(slash + 1), &used);
    if (used != cidr.size() - slash - 1) return false;
  } catch (const std::exception&) {
    return false;
  }
  if (!a || !net || len < 0 || len > 32) return false;
  return (*a & mask_of(len)) == (*net & mask_of(len));
}

bool nccl_ifname_matches(const std::string& name, const std::string& spec) {
  std::string list = spec;
  bool invert = false, exact = false;
  if (!list.empty() && list[0] == '^') {
    invert = true;
    list.erase(0, 1);
  }
  if (!list.empty() && list[0] == '=') {
    exact = true;
    list.erase(0, 1);
  }
  bool any = false;
  for (std::string item : split_list(list)) {
    // NCCL accepts "eth0:port"; the port does not take part in matching.
    if (const auto colon = item.find(':'); colon != std::string::npos) item.resize(colon);
    if (exact ? name == item : starts_with(name, item)) any = true;
  }
  if (spec.empty()) return false;
  return invert ? !any : any;
}

std::vector<std::string> nccl_interfaces(const std::vector<NetInterface>& ifs,
                                         const std::string& nccl_socket_ifname) {
  auto select = [&](const std::string& spec) {
    std::vector<std::string> out;
    for (const auto& i : ifs)
      if (nccl_ifname_matches(i.name, spec)) add_unique(out, i.name);
    return out;
  };
  if (!nccl_socket_ifname.empty()) return select(nccl_socket_ifname);
  for (const char* spec : {"ib", "^docker,lo,virbr", "docker", "lo"}) {
    auto out = select(spec);
    if (!out.empty()) return out;
  }
  return {};
}

std::vector<std::string> mpi_tcp_interfaces(const std::vector<NetInterface>& ifs,
                                            const std::string& if_include,
                                            const std::string& if_exclude) {
  std::vector<std::string> out;
  const auto include = split_list(if_include);
  const auto exclude = split_list(if_exclude.empty() ? "127.0.0.1/8,sppp" : if_exclude);
  for (const auto& i : ifs) {
    if (!i.up) continue;
    bool use = false;
    if (!include.empty()) {
      for (const auto& e : include) use = use || mpi_element_matches(i, e);
    } else {
      use = true;
      for (const auto& e : exclude) use = use && !mpi_element_matches(i, e);
    }
    if (use) add_unique(out, i.name);
  }
  return out;
}

NetworkVerdict analyze_network(const std::vector<HostNetwork>& hosts) {
  NetworkVerdict v;
  for (const auto& h : hosts) {
    const auto nccl = nccl_interfaces(h.interfaces, h.nccl_socket_ifname);
    const auto mpi = mpi_tcp_interfaces(h.interfaces, h.mpi_if_include, h.mpi_if_exclude);
    v.details.push_back(h.host + ": " + describe_interfaces(h.interfaces) + "; NCCL would use " +
                        (nccl.empty() ? "none" : join(nccl, ",")) +
                        (h.nccl_socket_ifname.empty() ? "" : " (NCCL_SOCKET_IFNAME)") +
                        "; MPI TCP would use " + (mpi.empty() ? "none" : join(mpi, ",")));
  }
  if (hosts.size() <= 1) return v;  // its ranks communicate through shared memory

  // Subnets of real (up, non-loopback, non-bridge) interfaces that every host has.
  std::vector<std::vector<std::string>> subnets(hosts.size());
  for (std::size_t k = 0; k < hosts.size(); ++k)
    for (const auto& i : hosts[k].interfaces)
      if (i.up && !i.loopback && !is_virtual_bridge(i.name)) add_unique(subnets[k], subnet_of(i));
  for (const auto& s : subnets[0]) {
    bool everywhere = true;
    for (const auto& other : subnets)
      everywhere = everywhere && std::find(other.begin(), other.end(), s) != other.end();
    if (everywhere && !s.empty()) v.shared_subnets.push_back(s);
  }
  if (v.shared_subnets.empty()) {
    std::string each;
    for (const auto& h : hosts) each += "; " + h.host + ": " + describe_interfaces(h.interfaces);
    v.errors.push_back(
        "the hosts share no IPv4 subnet on a real interface (docker/virbr bridges "
        "left out)" +
        each + ". MPI and NCCL need a network that every host is on.");
    return v;
  }
  const std::string shared = join(v.shared_subnets, ",");

  // NCCL: each host's first choice must be on the shared subnet.
  std::vector<std::string> off;                                   // "iface on host"
  std::vector<std::vector<std::string>> on_shared(hosts.size());  // per host: names on it
  std::vector<std::string> all_names;
  std::set<std::string> picks;
  auto first_is_on_shared = [&](const HostNetwork& h, const std::string& spec) {
    const auto nccl = nccl_interfaces(h.interfaces, spec);
    return !nccl.empty() && on_subnets(h.interfaces, nccl.front(), v.shared_subnets);
  };
  for (std::size_t k = 0; k < hosts.size(); ++k) {
    const auto& h = hosts[k];
    const auto nccl = nccl_interfaces(h.interfaces, h.nccl_socket_ifname);
    picks.insert(nccl.empty() ? "" : nccl.front());
    if (!first_is_on_shared(h, h.nccl_socket_ifname))
      off.push_back((nccl.empty() ? std::string("no interface") : nccl.front()) + " on " + h.host);
    for (const auto& i : h.interfaces)
      if (address_in_subnet(i.address, v.shared_subnets.front())) {
        add_unique(on_shared[k], i.name);
        add_unique(all_names, i.name);
      }
  }
  // One exact-name list for every host when it selects the right interface everywhere; otherwise
  // a value per host (a name on the shared subnet on one host may be off it on another).
  std::string nccl_fix = "NCCL_SOCKET_IFNAME==" + join(all_names, ",");
  bool global_ok = true;
  for (const auto& h : hosts)
    global_ok = global_ok && first_is_on_shared(h, "=" + join(all_names, ","));
  if (!global_ok) {
    nccl_fix = "per host";
    for (std::size_t k = 0; k < hosts.size(); ++k)
      nccl_fix += std::string(k ? "; " : " ") + hosts[k].host +
                  ": NCCL_SOCKET_IFNAME==" + join(on_shared[k], ",");
  }
  if (!off.empty()) {
    v.warnings.push_back("NCCL would use " + join(off, ", ") +
                         ", off the subnet all hosts share (" + shared + "): export " + nccl_fix);
  } else if (picks.size() > 1) {
    v.details.push_back("NCCL picks differently named interfaces on the hosts, all on " + shared +
                        " (to pin them: " + nccl_fix + ")");
  }

  // Open MPI's TCP transport tries every interface it is allowed; off-subnet ones can hang it.
  std::vector<std::string> mpi_off;
  for (const auto& h : hosts)
    for (const auto& name : mpi_tcp_interfaces(h.interfaces, h.mpi_if_include, h.mpi_if_exclude))
      if (!on_subnets(h.interfaces, name, v.shared_subnets))
        mpi_off.push_back(name + " on " + h.host);
  if (!mpi_off.empty())
    v.warnings.push_back("Open MPI's TCP transport would also try " + join(mpi_off, ", ") +
                         ", off the subnet all hosts share: export OMPI_MCA_btl_tcp_if_include=" +
                         shared + " (or mpirun --mca btl_tcp_if_include " + shared + ")");
  return v;
}

}  // namespace ddp::runtime
