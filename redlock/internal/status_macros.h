// Small status macros (Abseil 20220623 ships none).

#ifndef REDLOCK_INTERNAL_STATUS_MACROS_H_
#define REDLOCK_INTERNAL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define REDLOCK_CONCAT_INNER_(a, b) a##b
#define REDLOCK_CONCAT_(a, b) REDLOCK_CONCAT_INNER_(a, b)

// REDLOCK_RETURN_IF_ERROR(expr): returns the status of `expr` if it is not OK.
#define REDLOCK_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status redlock_status_ = (expr);           \
    if (!redlock_status_.ok()) return redlock_status_; \
  } while (0)

// REDLOCK_ASSIGN_OR_RETURN(lhs, expr): evaluates a StatusOr expression, returns its
// status on error, otherwise assigns (or declares) lhs from its value.
#define REDLOCK_ASSIGN_OR_RETURN(lhs, expr) \
  REDLOCK_ASSIGN_OR_RETURN_IMPL_(REDLOCK_CONCAT_(redlock_statusor_, __LINE__), lhs, expr)
#define REDLOCK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = *std::move(tmp)

#endif  // REDLOCK_INTERNAL_STATUS_MACROS_H_
