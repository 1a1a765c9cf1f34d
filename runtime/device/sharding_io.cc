#include "runtime/device/sharding_io.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/parallel.h"

namespace tpuoff::runtime {

using hlo::HloSharding;
using hlo::Literal;
using hlo::Shape;

namespace {

// Copies the box of `extent` elements at `src_origin` in a row-major array
// of `src_dims` to `dst_origin` in one of `dst_dims` (element `width` bytes).
void CopyBox(const uint8_t* src, const std::vector<int64_t>& src_dims,
             const std::vector<int64_t>& src_origin, uint8_t* dst,
             const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& dst_origin,
             const std::vector<int64_t>& extent, int64_t width) {
  const int64_t rank = static_cast<int64_t>(extent.size());
  if (rank == 0) {
    std::memcpy(dst, src, width);
    return;
  }
  for (int64_t e : extent) {
    if (e <= 0) return;
  }
  auto strides = [](const std::vector<int64_t>& dims) {
    std::vector<int64_t> s(dims.size(), 1);
    for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
      s[i] = s[i + 1] * dims[i + 1];
    }
    return s;
  };
  const std::vector<int64_t> ss = strides(src_dims), ds = strides(dst_dims);
  const int64_t row_bytes = extent[rank - 1] * width;
  std::vector<int64_t> idx(rank, 0);  // the last entry stays 0
  while (true) {
    int64_t s = 0, d = 0;
    for (int64_t i = 0; i < rank; ++i) {
      s += (src_origin[i] + idx[i]) * ss[i];
      d += (dst_origin[i] + idx[i]) * ds[i];
    }
    std::memcpy(dst + d * width, src + s * width, row_bytes);
    int64_t i = rank - 2;
    for (; i >= 0; --i) {
      if (++idx[i] < extent[i]) break;
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

// Where device `device`'s array sits in the global one, and how much of it
// is real (not padding).
struct Placement {
  std::vector<int64_t> origin;
  std::vector<int64_t> extent;
};

absl::StatusOr<Placement> PlacementOf(const HloSharding& s, const Shape& global,
                                      const Shape& local, int64_t device) {
  ASSIGN_OR_RETURN(std::vector<int64_t> tile,
                   hlo::TileIndexOfDevice(s, global.rank(), device));
  Placement p;
  for (int64_t i = 0; i < global.rank(); ++i) {
    const int64_t origin = tile[i] * local.dimensions(i);
    p.origin.push_back(origin);
    p.extent.push_back(
        std::clamp<int64_t>(global.dimensions(i) - origin, 0, local.dimensions(i)));
  }
  return p;
}

// The device array slice `device` of a manual (stacked) global array.
std::vector<int64_t> StackOrigin(int64_t rank, int64_t device) {
  std::vector<int64_t> o(rank + 1, 0);
  o[0] = device;
  return o;
}

// An array literal whose bytes are all about to be overwritten: no zero
// fill (for GiB-sized logits the fill costs as much as the copy).
Literal Uninitialized(const Shape& shape) {
  const size_t bytes = static_cast<size_t>(shape.byte_size());
  return Literal::AdoptArray(shape, HostAlloc(std::max<size_t>(bytes, 1)), &HostFree);
}

absl::Status CheckBitwiseEqual(const Literal& a, const Literal& b, int64_t device_a,
                               int64_t device_b, const std::string& what) {
  if (a.raw_size() == b.raw_size() &&
      std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.raw_size())) == 0) {
    return absl::OkStatus();
  }
  const int64_t width = hlo::ByteWidth(a.shape().element_type());
  int64_t first = 0;
  for (; first < a.num_elements(); ++first) {
    if (std::memcmp(a.raw() + first * width, b.raw() + first * width, width) != 0) break;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": the copies on devices ", device_a, " and ", device_b,
      " should be identical but differ at linear index ", first, " (", a.GetAsDouble(first),
      " vs ", b.GetAsDouble(first), ")"));
}

// Copies device d's piece of `global` into `piece`.
void CopyPiece(const Literal& global, const HloSharding& s, const Shape& local,
               const Placement& p, int64_t d, int64_t width, Literal* out) {
  Literal& piece = *out;
  {
    if (s.type == HloSharding::Type::kManual) {
      std::vector<int64_t> extent = {1};
      extent.insert(extent.end(), local.dimensions().begin(), local.dimensions().end());
      std::vector<int64_t> piece_dims = {1};
      piece_dims.insert(piece_dims.end(), local.dimensions().begin(), local.dimensions().end());
      CopyBox(global.raw(), global.shape().dimensions(), StackOrigin(local.rank(), d),
              piece.raw(), piece_dims, std::vector<int64_t>(local.rank() + 1, 0), extent,
              width);
    } else if (s.type == HloSharding::Type::kTiled) {
      CopyBox(global.raw(), global.shape().dimensions(), p.origin, piece.raw(),
              local.dimensions(), std::vector<int64_t>(local.rank(), 0), p.extent, width);
    } else {
      std::memcpy(piece.raw(), global.raw(), static_cast<size_t>(global.raw_size()));
    }
  }
}

}  // namespace

absl::StatusOr<PieceBox> PieceBoxOf(const HloSharding& s, const Shape& global,
                                    const Shape& local, int64_t device) {
  PieceBox box;
  switch (s.type) {
    case HloSharding::Type::kTiled: {
      ASSIGN_OR_RETURN(Placement p, PlacementOf(s, global, local, device));
      box.origin = p.origin;
      box.extent = p.extent;
      box.dims = local.dimensions();
      box.padded = box.extent != box.dims;
      return box;
    }
    case HloSharding::Type::kManual:
      box.origin = StackOrigin(local.rank(), device);
      box.extent = {1};
      box.extent.insert(box.extent.end(), local.dimensions().begin(), local.dimensions().end());
      box.dims = box.extent;
      return box;
    default:
      box.origin.assign(global.rank(), 0);
      box.extent = global.dimensions();
      box.dims = global.dimensions();
      return box;
  }
}

absl::StatusOr<std::vector<Literal>> SplitGlobal(const Literal& global, const HloSharding& s,
                                                 const Shape& local, int64_t num_devices,
                                                 int64_t first_device, int64_t count) {
  if (count < 0) {
    first_device = 0;
    count = num_devices;
  }
  ASSIGN_OR_RETURN(Shape expected_local, hlo::ShardShape(global.shape(), s));
  if (!expected_local.Compatible(local)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global array ", global.shape().ToString(), " split by its sharding gives ",
        expected_local.ToString(), " per device, expected ", local.ToString()));
  }
  const int64_t width = hlo::ByteWidth(local.element_type());
  const Shape piece_shape(local.element_type(), local.dimensions());
  std::vector<Placement> placements(count);
  std::vector<Literal> out;
  for (int64_t i = 0; i < count; ++i) {
    bool covered = s.type != HloSharding::Type::kTiled;
    if (s.type == HloSharding::Type::kTiled) {
      ASSIGN_OR_RETURN(placements[i], PlacementOf(s, global.shape(), local, first_device + i));
      covered = placements[i].extent == local.dimensions();
    }
    // Padding of an uneven last shard stays zero.
    out.push_back(covered ? Uninitialized(piece_shape) : Literal(piece_shape));
  }
  // Pieces are disjoint: copy them in parallel.
  ParallelFor(MaxParallelism(), count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      CopyPiece(global, s, local, placements[i], first_device + i, width, &out[i]);
    }
  });
  return out;
}



absl::StatusOr<Literal> AssembleGlobal(absl::Span<const Literal* const> per_device,
                                       const HloSharding& s, const Shape& global,
                                       const std::string& what) {
  if (per_device.empty()) return absl::InvalidArgumentError(what + ": no device arrays");
  const Shape& local = per_device[0]->shape();
  const int64_t n = static_cast<int64_t>(per_device.size());
  for (const Literal* l : per_device) {
    if (!l->shape().Compatible(local)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": devices returned different shapes (", local.ToString(), " vs ",
                       l->shape().ToString(), ")"));
    }
  }
  const int64_t width = hlo::ByteWidth(local.element_type());
  const Shape global_shape(global.element_type(), global.dimensions());
  switch (s.type) {
    case HloSharding::Type::kReplicated:
      for (int64_t d = 1; d < n; ++d) {
        RETURN_IF_ERROR(CheckBitwiseEqual(*per_device[0], *per_device[d], 0, d, what));
      }
      [[fallthrough]];
    case HloSharding::Type::kMaximal: {
      const int64_t src = s.type == HloSharding::Type::kMaximal && !s.devices.empty()
                              ? s.devices[0] : 0;
      Literal out = Uninitialized(global_shape);
      if (src >= n || per_device[src]->raw_size() != out.raw_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": shape ", local.ToString(), " is not the global ",
                         global.ToString()));
      }
      std::memcpy(out.raw(), per_device[src]->raw(), static_cast<size_t>(out.raw_size()));
      return out;
    }
    case HloSharding::Type::kManual: {
      Literal out = Uninitialized(global_shape);
      std::vector<int64_t> extent = {1};
      extent.insert(extent.end(), local.dimensions().begin(), local.dimensions().end());
      std::vector<int64_t> piece_dims = extent;
      for (int64_t d = 0; d < n; ++d) {
        CopyBox(per_device[d]->raw(), piece_dims, std::vector<int64_t>(local.rank() + 1, 0),
                out.raw(), global.dimensions(), StackOrigin(local.rank(), d), extent, width);
      }
      return out;
    }
    case HloSharding::Type::kTiled: {
      std::vector<std::pair<std::vector<int64_t>, int64_t>> seen;  // tile -> device
      for (int64_t d = 0; d < n; ++d) {
        ASSIGN_OR_RETURN(std::vector<int64_t> tile,
                         hlo::TileIndexOfDevice(s, global.rank(), d));
        auto it = std::find_if(seen.begin(), seen.end(),
                               [&](const auto& e) { return e.first == tile; });
        if (it != seen.end()) {
          RETURN_IF_ERROR(
              CheckBitwiseEqual(*per_device[it->second], *per_device[d], it->second, d, what));
          continue;
        }
        seen.emplace_back(tile, d);
      }
      // Unique tiles are disjoint boxes: copy them in parallel, into
      // uninitialised memory when they cover the whole array.
      std::vector<Placement> boxes(seen.size());
      int64_t covered = 0;
      for (size_t t = 0; t < seen.size(); ++t) {
        ASSIGN_OR_RETURN(boxes[t], PlacementOf(s, global, local, seen[t].second));
        int64_t volume = 1;
        for (int64_t e : boxes[t].extent) volume *= e;
        covered += volume;
      }
      Literal out = covered == global_shape.num_elements() ? Uninitialized(global_shape)
                                                           : Literal(global_shape);
      ParallelFor(MaxParallelism(), static_cast<int64_t>(seen.size()),
                  [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          CopyBox(per_device[seen[t].second]->raw(), local.dimensions(),
                  std::vector<int64_t>(local.rank(), 0), out.raw(), global.dimensions(),
                  boxes[t].origin, boxes[t].extent, width);
        }
      });
      return out;
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": unsupported sharding"));
}

absl::StatusOr<std::vector<std::vector<Literal>>> SplitArguments(
    const hlo::PartitionedSignature& sig, absl::Span<const Literal> global_args,
    int64_t first, int64_t count) {
  if (count < 0) {
    first = 0;
    count = sig.num_devices;
  }
  const size_t num_params = sig.global_parameters.size();
  if (global_args.size() != num_params) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", num_params,
                                                   " global arguments, got ",
                                                   global_args.size()));
  }
  std::vector<std::vector<Literal>> per_device(count);
  for (size_t i = 0; i < num_params; ++i) {
    const Shape& want = sig.global_parameters[i];
    const Shape& got = global_args[i].shape();
    if (!got.Compatible(want)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", sig.parameter_names[i],
                                                     ": global argument is ", got.ToString(),
                                                     ", expected ", want.ToString()));
    }
    ASSIGN_OR_RETURN(std::vector<Literal> pieces,
                     SplitGlobal(global_args[i], sig.parameter_shardings[i],
                                 sig.local_parameters[i], sig.num_devices, first, count));
    for (int64_t d = 0; d < count; ++d) per_device[d].push_back(std::move(pieces[d]));
  }
  return per_device;
}

absl::StatusOr<std::vector<Literal>> AssembleOutputs(const hlo::PartitionedSignature& sig,
                                                     absl::Span<const Literal> per_device,
                                                     const std::vector<std::string>& names) {
  const int64_t leaves = static_cast<int64_t>(sig.global_outputs.size());
  if (static_cast<int64_t>(per_device.size()) != leaves * sig.num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", leaves, " outputs from each of ", sig.num_devices, " devices, got ",
        per_device.size(), " in all"));
  }
  std::vector<Literal> out;
  for (int64_t i = 0; i < leaves; ++i) {
    std::vector<const Literal*> pieces;
    for (int64_t d = 0; d < sig.num_devices; ++d) pieces.push_back(&per_device[d * leaves + i]);
    const std::string what = i < static_cast<int64_t>(names.size())
                                 ? absl::StrCat("output ", names[i])
                                 : absl::StrCat("output ", i);
    ASSIGN_OR_RETURN(Literal global, AssembleGlobal(pieces, sig.output_shardings[i],
                                                    sig.global_outputs[i], what));
    out.push_back(std::move(global));
  }
  return out;
}

}  // namespace tpuoff::runtime
