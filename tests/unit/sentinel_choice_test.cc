// Which master a Sentinel-managed node uses (internal/sentinel_choice.h):
// a round's order of preference, the refusal memory, and when answers
// outside a round move a working node.

#include "redlock/internal/sentinel_choice.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace redlock::internal {
namespace {

SentinelTime At(int seconds) { return SentinelTime() + std::chrono::seconds(seconds); }

TEST(SentinelChoice, ARoundPrefersTheHighestEpochThenTheUnrefusedThenTheMostVotes) {
  std::map<std::string, SentinelTime> refused;
  // Two Sentinels name an old master (epoch 3), one a newer one (epoch 4).
  auto best = ChooseInRound({{0, "a", 1, 3}, {1, "a", 1, 3}, {2, "b", 2, 4}}, &refused, At(100));
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->address, "b:2");
  // Equal epochs: the most votes.
  best = ChooseInRound({{0, "a", 1, 3}, {1, "a", 1, 3}, {2, "b", 2, 3}}, &refused, At(100));
  EXPECT_EQ(best->address, "a:1");
  // Unless it was refused lately: the other is tried first.
  refused["a:1"] = At(90);
  best = ChooseInRound({{0, "a", 1, 3}, {1, "a", 1, 3}, {2, "b", 2, 3}}, &refused, At(100));
  EXPECT_EQ(best->address, "b:2");
  // Both refused: the least recently refused first.
  refused["b:2"] = At(95);
  best = ChooseInRound({{0, "a", 1, 3}, {1, "a", 1, 3}, {2, "b", 2, 3}}, &refused, At(100));
  EXPECT_EQ(best->address, "a:1");
  // A refusal older than the memory is forgotten.
  best = ChooseInRound({{0, "a", 1, 3}, {2, "b", 2, 3}}, &refused, At(95 + 61));
  EXPECT_EQ(refused.count("a:1"), 0u);
  EXPECT_EQ(refused.count("b:2"), 0u);
  EXPECT_EQ(best->address, "a:1") << "equal votes: the endpoint's order";
  EXPECT_FALSE(ChooseInRound({}, &refused, At(0)).has_value());
}

TEST(SentinelChoice, OutsideARoundAStaleMinorityNeverMovesAWorkingNode) {
  MasterCandidate was;
  // One Sentinel of three names another master at the same epoch: stay.
  EXPECT_FALSE(MoveOutsideRound({{0, "b", 2, 5}}, "a:1", 5, 3, &was).has_value());
  // An older epoch: stay.
  EXPECT_FALSE(MoveOutsideRound({{0, "b", 2, 4}, {1, "b", 2, 4}}, "a:1", 5, 3, &was).has_value());
  // A newer epoch: move.
  auto move = MoveOutsideRound({{0, "b", 2, 6}}, "a:1", 5, 3, &was);
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(move->address, "b:2");
  // A majority at equal epoch, beating the current master's votes: move.
  move = MoveOutsideRound({{0, "b", 2, 5}, {1, "b", 2, 5}, {2, "a", 1, 5}}, "a:1", 5, 3, &was);
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(was.votes, 1);
  EXPECT_FALSE(MoveOutsideRound({}, "a:1", 5, 3, &was).has_value());
}

TEST(SentinelChoice, TheConfigEpochOfASentinelMasterReply) {
  Reply r = Reply::Array({Reply::String("name"), Reply::String("m"), Reply::String("config-epoch"),
                          Reply::String("17")});
  EXPECT_EQ(ConfigEpoch(r), 17);
  EXPECT_EQ(ConfigEpoch(Reply::Array({Reply::String("name")})), -1);
  EXPECT_EQ(ConfigEpoch(Reply::Error("NOPERM")), -1);
}

}  // namespace
}  // namespace redlock::internal
