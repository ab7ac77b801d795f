// Internal: rank values a layer copy leaves to be made when first read
// (LayerCopy.h). A copied layer's values are its template's renamed; only
// those something outside the layer reads are made with the copy.
#pragma once

#include "Values.h"

#include <vector>

namespace shardproof::relation {

class PendingValues {
public:
  virtual ~PendingValues() = default;
  /// Makes rank `rank`'s value `value` if a copy left it pending; every
  /// reader of rank values after the world is built asks first.
  virtual void ensure(int rank, int value) = 0;
};

/// Rank `rank`'s value `value` as read after the world is built: made first
/// if a copy left it pending (`pending` null: nothing is).
inline const ValueInfo &rankValue(const std::vector<std::vector<ValueInfo>> &values, PendingValues *pending,
                                  int rank, int value) {
  if (pending)
    pending->ensure(rank, value);
  return values[rank][value];
}

} // namespace shardproof::relation
