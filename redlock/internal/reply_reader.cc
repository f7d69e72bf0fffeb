#include "redlock/internal/reply_reader.h"

#include <hiredis/hiredis.h>

#include <utility>

namespace redlock::internal {
namespace {

// Where the object of `task` lives: the reader's slot for a top-level reply,
// else its element in the parent array (sized by CreateArray).
Reply* Place(const redisReadTask* task) {
  if (task->parent == nullptr) return static_cast<Reply*>(task->privdata);
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
  Reply* r = Place(task);
  r->type = Reply::Type::kArray;
  r->elements.clear();
  r->elements.resize(static_cast<size_t>(elements));
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

ReplyReader::ReplyReader() : reader_(redisReaderCreateWithFunctions(&kFunctions)) {
  reader_->privdata = &slot_;
}

ReplyReader::~ReplyReader() { redisReaderFree(reader_); }

bool ReplyReader::Feed(const char* data, size_t len) {
  return redisReaderFeed(reader_, data, len) == REDIS_OK;
}

int ReplyReader::Next(Reply* out) {
  void* obj = nullptr;
  if (redisReaderGetReply(reader_, &obj) != REDIS_OK) return -1;
  if (obj == nullptr) return 0;
  *out = std::move(slot_);
  slot_ = Reply();
  return 1;
}

std::string ReplyReader::error() const { return reader_->errstr; }

}  // namespace redlock::internal
