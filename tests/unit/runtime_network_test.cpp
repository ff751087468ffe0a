// Which interfaces NCCL and Open MPI would use, and the doctor's multi-host network verdict, as
// pure functions over interface lists (the real list of this machine is checked by
// list_interfaces).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ddp/runtime/network.hpp"

namespace ddp::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

NetInterface iface(const std::string& name, const std::string& addr, int len) {
  return {name, addr, len, true, name == "lo"};
}

TEST(Network, SubnetsFromAddresses) {
  EXPECT_EQ(subnet_of(iface("eth0", "10.77.3.11", 24)), "10.77.3.0/24");
  EXPECT_EQ(subnet_of(iface("eth0", "172.17.200.1", 16)), "172.17.0.0/16");
  EXPECT_EQ(subnet_of(iface("eth0", "192.168.1.7", 32)), "192.168.1.7/32");
  EXPECT_EQ(subnet_of(iface("eth0", "not-an-address", 24)), "");
  EXPECT_TRUE(address_in_subnet("10.77.3.11", "10.77.3.0/24"));
  EXPECT_TRUE(address_in_subnet("127.0.0.1", "127.0.0.1/8"));
  EXPECT_FALSE(address_in_subnet("10.77.4.11", "10.77.3.0/24"));
  EXPECT_TRUE(address_in_subnet("8.8.8.8", "0.0.0.0/0"));
  EXPECT_FALSE(address_in_subnet("10.0.0.1", "10.0.0.0"));     // no prefix length
  EXPECT_FALSE(address_in_subnet("10.0.0.1", "10.0.0.0/33"));  // out of range
  EXPECT_FALSE(address_in_subnet("10.0.0.1", "10.0.0.0/2x"));
}

TEST(Network, ListsThisHostsInterfacesWithLoopback) {
  const auto ifs = list_interfaces();
  bool lo = false;
  for (const auto& i : ifs)
    lo = lo || (i.loopback && i.address == "127.0.0.1" && i.prefix_len == 8);
  EXPECT_TRUE(lo) << "every Linux host (and network namespace we start) has lo 127.0.0.1/8";
}

TEST(Network, NcclSocketIfnameRules) {
  EXPECT_TRUE(nccl_ifname_matches("eth0", "eth"));
  EXPECT_TRUE(nccl_ifname_matches("ens3f0", "eth,ens"));
  EXPECT_FALSE(nccl_ifname_matches("ib0", "eth,ens"));
  EXPECT_FALSE(nccl_ifname_matches("docker0", "^docker,lo"));
  EXPECT_TRUE(nccl_ifname_matches("eth0", "^docker,lo"));
  EXPECT_TRUE(nccl_ifname_matches("eth0", "=eth0"));
  EXPECT_FALSE(nccl_ifname_matches("eth01", "=eth0"));
  EXPECT_FALSE(nccl_ifname_matches("eth0", "^=eth0"));
  EXPECT_TRUE(nccl_ifname_matches("eth0", "eth0:5555"));  // a port does not take part
  EXPECT_FALSE(nccl_ifname_matches("eth0", ""));
}

TEST(Network, NcclDefaultOrderPrefersInfinibandThenRealInterfaces) {
  const std::vector<NetInterface> all = {
      iface("lo", "127.0.0.1", 8), iface("docker0", "172.17.0.1", 16),
      iface("eth0", "10.0.0.5", 24), iface("ib0", "10.1.0.5", 24)};
  EXPECT_THAT(nccl_interfaces(all, ""), ElementsAre("ib0"));
  const std::vector<NetInterface> no_ib(all.begin(), all.begin() + 3);
  EXPECT_THAT(nccl_interfaces(no_ib, ""), ElementsAre("eth0"));
  const std::vector<NetInterface> only_virtual(all.begin(), all.begin() + 2);
  EXPECT_THAT(nccl_interfaces(only_virtual, ""), ElementsAre("docker0"));
  EXPECT_THAT(nccl_interfaces({all[0]}, ""), ElementsAre("lo"));
  EXPECT_THAT(nccl_interfaces(all, "=eth0"), ElementsAre("eth0"));
  EXPECT_THAT(nccl_interfaces(all, "^ib"), ElementsAre("lo", "docker0", "eth0"));
  EXPECT_THAT(nccl_interfaces(all, "enp"), ElementsAre());  // NCCL would find nothing
}

TEST(Network, OpenMpiTcpInterfaces) {
  std::vector<NetInterface> ifs = {iface("lo", "127.0.0.1", 8), iface("docker0", "172.17.0.1", 16),
                                   iface("eth0", "10.0.0.5", 24)};
  EXPECT_THAT(mpi_tcp_interfaces(ifs, "", ""), ElementsAre("docker0", "eth0"));  // default: no lo
  EXPECT_THAT(mpi_tcp_interfaces(ifs, "10.0.0.0/24", ""), ElementsAre("eth0"));
  EXPECT_THAT(mpi_tcp_interfaces(ifs, "eth0,lo", ""), ElementsAre("lo", "eth0"));
  EXPECT_THAT(mpi_tcp_interfaces(ifs, "", "docker0,127.0.0.1/8"), ElementsAre("eth0"));
  ifs[2].up = false;
  EXPECT_THAT(mpi_tcp_interfaces(ifs, "", ""), ElementsAre("docker0"));
}

TEST(Network, OneHostNeedsNoSharedSubnet) {
  const auto v = analyze_network({{"a", {iface("lo", "127.0.0.1", 8)}, "", "", ""}});
  EXPECT_TRUE(v.errors.empty());
  EXPECT_TRUE(v.warnings.empty());
  ASSERT_EQ(v.details.size(), 1u);
  EXPECT_THAT(v.details[0], HasSubstr("a: lo 127.0.0.1/8; NCCL would use lo"));
}

TEST(Network, DockerBridgesOnEveryHostAreNotASharedNetwork) {
  // The classic hang: every host has docker0 on 172.17.0.0/16; Open MPI's TCP transport tries it.
  const std::vector<HostNetwork> hosts = {
      {"a",
       {iface("lo", "127.0.0.1", 8), iface("docker0", "172.17.0.1", 16),
        iface("eth0", "10.0.0.5", 24)},
       "",
       "",
       ""},
      {"b",
       {iface("lo", "127.0.0.1", 8), iface("docker0", "172.17.0.1", 16),
        iface("eth0", "10.0.0.6", 24)},
       "",
       "",
       ""}};
  const auto v = analyze_network(hosts);
  EXPECT_TRUE(v.errors.empty());
  EXPECT_THAT(v.shared_subnets, ElementsAre("10.0.0.0/24"));
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_THAT(v.warnings[0], HasSubstr("docker0 on a, docker0 on b"));
  EXPECT_THAT(v.warnings[0], HasSubstr("OMPI_MCA_btl_tcp_if_include=10.0.0.0/24"));
  // Pinned the way the warning says: nothing left to warn about.
  auto pinned = hosts;
  for (auto& h : pinned) h.mpi_if_include = "10.0.0.0/24";
  EXPECT_TRUE(analyze_network(pinned).warnings.empty());
}

TEST(Network, NcclOffTheSharedSubnetSuggestsSocketIfname) {
  // Host a's first real interface is a management network that b is not on.
  const std::vector<HostNetwork> hosts = {
      {"a",
       {iface("eth0", "192.168.1.5", 24), iface("ens1", "10.0.0.5", 24)},
       "",
       "10.0.0.0/24",
       ""},
      {"b", {iface("ens1", "10.0.0.6", 24)}, "", "10.0.0.0/24", ""}};
  const auto v = analyze_network(hosts);
  EXPECT_TRUE(v.errors.empty());
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_THAT(v.warnings[0], HasSubstr("NCCL would use eth0 on a, off the subnet"));
  EXPECT_THAT(v.warnings[0], HasSubstr("export NCCL_SOCKET_IFNAME==ens1"));
  auto fixed = hosts;
  for (auto& h : fixed) h.nccl_socket_ifname = "=ens1";
  EXPECT_TRUE(analyze_network(fixed).warnings.empty());
}

TEST(Network, AmbiguousInterfaceNamesGetOneValuePerHost) {
  // eth0 is the shared network on b but the management network on a: no single list works.
  const std::vector<HostNetwork> hosts = {
      {"a",
       {iface("eth0", "192.168.1.5", 24), iface("ens1", "10.0.0.5", 24)},
       "",
       "10.0.0.0/24",
       ""},
      {"b", {iface("eth0", "10.0.0.6", 24)}, "", "10.0.0.0/24", ""}};
  const auto v = analyze_network(hosts);
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_THAT(v.warnings[0],
              HasSubstr("per host a: NCCL_SOCKET_IFNAME==ens1; b: NCCL_SOCKET_IFNAME==eth0"));
  auto fixed = hosts;
  fixed[0].nccl_socket_ifname = "=ens1";
  fixed[1].nccl_socket_ifname = "=eth0";
  // Both on the shared subnet now; the names differ, which is fine.
  const auto after = analyze_network(fixed);
  EXPECT_TRUE(after.warnings.empty());
  EXPECT_THAT(after.details.back(), HasSubstr("differently named"));
}

TEST(Network, HostsWithoutASharedSubnetAreAnError) {
  const auto v = analyze_network({{"a", {iface("eth0", "10.0.0.5", 24)}, "", "", ""},
                                  {"b", {iface("eth0", "10.0.1.5", 24)}, "", "", ""}});
  ASSERT_EQ(v.errors.size(), 1u);
  EXPECT_THAT(v.errors[0], HasSubstr("share no IPv4 subnet"));
  EXPECT_THAT(v.errors[0], HasSubstr("a: eth0 10.0.0.5/24; b: eth0 10.0.1.5/24"));
}

}  // namespace
}  // namespace ddp::runtime
