// Attaching an Outcome to the statuses the operations return.

#ifndef REDLOCK_INTERNAL_OUTCOME_PAYLOAD_H_
#define REDLOCK_INTERNAL_OUTCOME_PAYLOAD_H_

#include "absl/status/status.h"
#include "redlock/outcome.h"

namespace redlock::internal {

// Attaches `outcome` to a failed `status` (GetOutcome reads it back).
void AttachOutcome(absl::Status* status, const Outcome& outcome);

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_OUTCOME_PAYLOAD_H_
