#include "redlock/internal/engine_tasks.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace redlock::internal {

EngineTasks::TimerId EngineTasks::AddTimer(TimePoint at, Task fn) {
  std::lock_guard<std::mutex> lock(mu_);
  const TimerId id = next_timer_id_++;
  timers_.emplace(std::make_pair(at, id), std::move(fn));
  timer_index_.emplace(id, at);
  return id;
}

bool EngineTasks::Cancel(TimerId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = timer_index_.find(id);
  if (it == timer_index_.end()) return false;
  timers_.erase(std::make_pair(it->second, id));
  timer_index_.erase(it);
  return true;
}

bool EngineTasks::Post(Task fn) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool was_empty = posted_.empty();
  posted_.push_back(std::move(fn));
  return was_empty;
}

EngineTasks::TimePoint EngineTasks::NextWake(TimePoint now, TimePoint wake) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!timers_.empty()) wake = std::min(wake, timers_.begin()->first.first);
  if (!posted_.empty()) wake = now;
  return wake;
}

bool EngineTasks::DueBefore(TimePoint wake, bool io_thread) const {
  std::lock_guard<std::mutex> lock(mu_);
  return !posted_.empty() || (!timers_.empty() && timers_.begin()->first.first < wake) ||
         (io_thread && !user_.empty());
}

void EngineTasks::RunTimers(TimePoint now) {
  std::vector<Task> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!timers_.empty() && timers_.begin()->first.first <= now) {
      auto it = timers_.begin();
      timer_index_.erase(it->first.second);
      due.push_back(std::move(it->second));
      timers_.erase(it);
    }
  }
  for (auto& fn : due) fn();
}

void EngineTasks::RunPosted() {
  // Bounded: tasks posted by these tasks run on the next turn.
  std::vector<Task> batch = std::move(posted_spare_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
  batch.clear();
  posted_spare_ = std::move(batch);
}

void EngineTasks::PushUser(Task fn) {
  std::lock_guard<std::mutex> lock(mu_);
  user_.push_back(std::move(fn));
}

bool EngineTasks::HasUser() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !user_.empty();
}

void EngineTasks::RunUserCallback(Task& fn) {
  in_user_callback_ = true;
  fn();
  in_user_callback_ = false;
}

void EngineTasks::RunUser() {
  for (int round = 0; round < 100; ++round) {
    std::vector<Task> batch = std::move(user_spare_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(user_);
    }
    const bool empty = batch.empty();
    for (auto& fn : batch) RunUserCallback(fn);
    batch.clear();
    user_spare_ = std::move(batch);
    if (empty) return;
  }
}

bool EngineTasks::HasQueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !posted_.empty() || !user_.empty();
}

void EngineTasks::RunAllRemaining(int max_rounds) {
  for (int round = 0;; ++round) {
    std::vector<Task> due;
    std::vector<Task> posted, user;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, fn] : timers_) due.push_back(std::move(fn));
      timers_.clear();
      timer_index_.clear();
      posted.swap(posted_);
      user.swap(user_);
    }
    if (due.empty() && posted.empty() && user.empty()) break;
    if (round == max_rounds) {
      std::fprintf(stderr,
                   "redlock: callbacks kept starting new calls while the client was being "
                   "destroyed; after %d rounds, %zu callbacks were dropped unrun\n",
                   max_rounds, due.size() + posted.size() + user.size());
      break;
    }
    for (auto& fn : due) fn();
    for (auto& fn : posted) fn();
    for (auto& fn : user) RunUserCallback(fn);
  }
}

}  // namespace redlock::internal
