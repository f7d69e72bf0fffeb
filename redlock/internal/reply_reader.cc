#include "redlock/internal/reply_reader.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace redlock::internal {
namespace {

using Build = ReplyReader::Build;

// Where the object of `task` lives: the reader's slot for a top-level reply,
// else its element in the parent array (sized by CreateArray).
Reply* Place(const redisReadTask* task) {
  if (task->parent == nullptr) return &static_cast<Build*>(task->privdata)->slot;
  Reply* parent = static_cast<Reply*>(task->parent->obj);
  return &parent->elements[static_cast<size_t>(task->idx)];
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  Reply* r = Place(task);
  switch (task->type) {
    case REDIS_REPLY_ERROR:
      r->type = Reply::Type::kError;
      break;
    case REDIS_REPLY_STATUS:
      r->type = Reply::Type::kStatus;
      break;
    default:
      r->type = Reply::Type::kString;
      break;
  }
  r->str.assign(str, len);
  return r;
}

void* CreateArray(const redisReadTask* task, int elements) {
  // hiredis refuses counts below -1 and above INT_MAX itself; -1 is nil.
  Build* build = static_cast<Build*>(task->privdata);
  const size_t count = elements < 0 ? 0 : static_cast<size_t>(elements);
  if (count > build->max_elements - std::min(build->elements, build->max_elements)) {
    // Refused before the elements are allocated (hiredis reports "out of
    // memory" for a null object; error() gives this message instead).
    build->error = absl::StrCat(
        "reply over the limit: an array of ", count, " elements announced after ", build->elements,
        " others, more than Options::max_reply_elements (", build->max_elements, ") in one reply");
    return nullptr;
  }
  build->elements += count;
  Reply* r = Place(task);
  r->type = Reply::Type::kArray;
  r->elements.clear();
  r->elements.resize(count);
  return r;
}

void* CreateInteger(const redisReadTask* task, long long value) {
  Reply* r = Place(task);
  r->type = Reply::Type::kInteger;
  r->integer = value;
  return r;
}

void* CreateNil(const redisReadTask* task) {
  Reply* r = Place(task);
  r->type = Reply::Type::kNil;
  return r;
}

// Objects live in the slot or in their parent: nothing to free.
void FreeObject(void*) {}

redisReplyObjectFunctions kFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                        FreeObject};

}  // namespace

ReplyReader::ReplyReader(ReplyLimits limits)
    : limits_(limits), reader_(redisReaderCreateWithFunctions(&kFunctions)) {
  build_.max_elements = limits_.max_elements;
  reader_->privdata = &build_;
}

ReplyReader::~ReplyReader() { redisReaderFree(reader_); }

size_t ReplyReader::Buffered() const { return reader_->len - reader_->pos; }

bool ReplyReader::Feed(const char* data, size_t len) {
  if (!error_.empty()) return false;
  if (redisReaderFeed(reader_, data, len) != REDIS_OK) return false;
  fed_ += len;
  return true;
}

bool ReplyReader::CheckInProgress() {
  const uint64_t so_far = fed_ - reply_start_;
  if (so_far > limits_.max_bytes) {
    error_ = absl::StrCat("reply over the limit: ", so_far,
                          " bytes received of one reply, more than Options::max_reply_bytes (",
                          limits_.max_bytes, ")");
    return false;
  }
  // A bulk string is kept in the buffer until all of it is there: refuse it
  // as soon as its header announces more than the limit. After a reply that
  // needs more bytes, hiredis leaves unconsumed only the item in progress,
  // and the only item that waits beyond a complete line is a bulk string
  // whose header (after the '$' already consumed) is that line.
  if (reader_->ridx < 0 || reader_->rstack[reader_->ridx].type != REDIS_REPLY_STRING) return true;
  absl::string_view pending(reader_->buf + reader_->pos, Buffered());
  const size_t eol = pending.find("\r\n");
  if (eol == absl::string_view::npos) return true;
  int64_t announced = 0;
  if (!absl::SimpleAtoi(pending.substr(0, eol), &announced) || announced < 0) return true;
  const uint64_t before = fed_ - Buffered() - reply_start_;
  if (static_cast<uint64_t>(announced) > limits_.max_bytes ||
      before + eol + 4 + static_cast<uint64_t>(announced) > limits_.max_bytes) {
    error_ = absl::StrCat("reply over the limit: a bulk string of ", announced,
                          " bytes announced, more than Options::max_reply_bytes (",
                          limits_.max_bytes, ") in one reply");
    return false;
  }
  return true;
}

int ReplyReader::Next(Reply* out) {
  if (!error_.empty()) return -1;
  void* obj = nullptr;
  if (redisReaderGetReply(reader_, &obj) != REDIS_OK) {
    error_ = !build_.error.empty() ? build_.error : std::string(reader_->errstr);
    if (error_.empty()) error_ = "unreadable reply";
    return -1;
  }
  if (obj == nullptr) return CheckInProgress() ? 0 : -1;
  // Complete. One Feed larger than the limit can hold a whole reply that
  // CheckInProgress never saw in progress: the same limit applies to it.
  const uint64_t end = fed_ - Buffered();
  if (end - reply_start_ > limits_.max_bytes) {
    error_ = absl::StrCat("reply over the limit: a reply of ", end - reply_start_,
                          " bytes, more than Options::max_reply_bytes (", limits_.max_bytes, ")");
    return -1;
  }
  reply_start_ = end;
  build_.elements = 0;
  *out = std::move(build_.slot);
  build_.slot = Reply();
  return 1;
}

std::string ReplyReader::error() const {
  return !error_.empty() ? error_ : std::string(reader_->errstr);
}

}  // namespace redlock::internal
