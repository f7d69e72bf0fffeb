// Redis Cluster's key space without a server (internal/cluster_slots.h): the
// slot of a key and its hash tag, the slot map CLUSTER SLOTS reports, and the
// MOVED and ASK redirections.

#include "redlock/internal/cluster_slots.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace redlock::internal {
namespace {

using ::testing::HasSubstr;

TEST(ClusterSlots, KeysHashAsRedisClusterHashesThem) {
  // The CRC16 check value of XMODEM.
  EXPECT_EQ(Crc16("123456789"), 0x31C3);
  // As CLUSTER KEYSLOT answers.
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot(""), 0);
  // Hash tags: the first {...} that is not empty.
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(HashedPart("foo{}{bar}"), "foo{}{bar}") << "an empty tag hashes the whole key";
  EXPECT_EQ(HashedPart("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(HashedPart("foo{bar}{zap}"), "bar");
  EXPECT_EQ(HashedPart("foo{bar"), "foo{bar");
  EXPECT_TRUE(HasHashTag("locks/{order42}:a"));
  EXPECT_FALSE(HasHashTag("locks/order42"));
  EXPECT_FALSE(HasHashTag("a{}b"));
}

TEST(ClusterSlots, TheSlotMapIsParsedOrRefusedSayingWhy) {
  Reply map = Reply::Array(
      {Reply::Array(
           {Reply::Integer(0), Reply::Integer(5460),
            Reply::Array({Reply::String("127.0.0.1"), Reply::Integer(7001), Reply::String("id0")}),
            Reply::Array({Reply::String("127.0.0.1"), Reply::Integer(7004)})}),
       Reply::Array({Reply::Integer(5461), Reply::Integer(16383),
                     Reply::Array({Reply::String(""), Reply::Integer(7002)})})});
  absl::StatusOr<std::vector<SlotRange>> r = ParseClusterSlots(map, "10.1.1.1");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].first, 0);
  EXPECT_EQ((*r)[0].last, 5460);
  EXPECT_EQ((*r)[0].port, 7001);
  EXPECT_EQ((*r)[1].host, "10.1.1.1") << "an empty host is the member asked";

  EXPECT_THAT(
      std::string(
          ParseClusterSlots(Reply::Error("ERR cluster support disabled"), "h").status().message()),
      HasSubstr("cluster support disabled"));
  EXPECT_THAT(std::string(ParseClusterSlots(Reply::Array({}), "h").status().message()),
              HasSubstr("no slot"));
  EXPECT_FALSE(ParseClusterSlots(Reply::Integer(3), "h").ok());
  Reply backwards =
      Reply::Array({Reply::Array({Reply::Integer(9), Reply::Integer(3),
                                  Reply::Array({Reply::String("h"), Reply::Integer(1)})})});
  EXPECT_THAT(std::string(ParseClusterSlots(backwards, "h").status().message()), HasSubstr("9-3"));
  Reply hidden =
      Reply::Array({Reply::Array({Reply::Integer(0), Reply::Integer(3),
                                  Reply::Array({Reply::String("?"), Reply::Integer(1)})})});
  EXPECT_THAT(std::string(ParseClusterSlots(hidden, "h").status().message()),
              HasSubstr("no address"));
  Reply bad_port =
      Reply::Array({Reply::Array({Reply::Integer(0), Reply::Integer(3),
                                  Reply::Array({Reply::String("h"), Reply::Integer(0)})})});
  EXPECT_FALSE(ParseClusterSlots(bad_port, "h").ok());
}

TEST(ClusterSlots, RedirectionsAreRead) {
  std::optional<Redirect> moved = ParseRedirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved.has_value());
  EXPECT_FALSE(moved->ask);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->address(), "127.0.0.1:6381");
  std::optional<Redirect> ask = ParseRedirect("ASK 12 ::1:7000");
  ASSERT_TRUE(ask.has_value());
  EXPECT_TRUE(ask->ask);
  EXPECT_EQ(ask->host, "::1");
  EXPECT_EQ(ask->address(), "[::1]:7000");
  for (const char* not_one :
       {"ERR x", "MOVED", "MOVED 1", "MOVED x h:1", "MOVED 16384 h:1", "MOVED 1 h", "MOVED 1 h:0",
        "ASK 1 :1", "NOSCRIPT No matching script"}) {
    EXPECT_FALSE(ParseRedirect(not_one).has_value()) << not_one;
  }
}

}  // namespace
}  // namespace redlock::internal
