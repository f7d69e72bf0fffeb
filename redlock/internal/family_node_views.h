// The lock family's typed views: each node's FamilyNodeView
// (Client::InspectFamily) as a primitive's own view (FairNodeView,
// ReadWriteNodeView).

#ifndef REDLOCK_INTERNAL_FAMILY_NODE_VIEWS_H_
#define REDLOCK_INTERNAL_FAMILY_NODE_VIEWS_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "redlock/node_status.h"

namespace redlock::internal {

// `views` as `View`s, one a node in the same order: `node` and `status` as
// they are, the primitive's own fields through `fill(family_view, view)`.
template <typename View, typename Fill>
absl::StatusOr<std::vector<View>> FamilyViewsAs(absl::StatusOr<std::vector<FamilyNodeView>> views,
                                                Fill fill) {
  if (!views.ok()) return views.status();
  std::vector<View> out;
  out.reserve(views->size());
  for (FamilyNodeView& family : *views) {
    View view;
    view.node = std::move(family.node);
    view.status = std::move(family.status);
    fill(family, view);
    out.push_back(std::move(view));
  }
  return out;
}

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAMILY_NODE_VIEWS_H_
