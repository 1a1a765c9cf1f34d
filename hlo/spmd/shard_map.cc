#include "hlo/spmd/shard_map.h"

#include "absl/strings/str_cat.h"
#include "hlo/spmd/sharding_util.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

// Checks `spec` against an array of `shape` on `mesh`; `what` names it.
absl::Status CheckSpec(const PartitionSpec& spec, const Shape& shape, const Mesh& mesh,
                       const std::string& what) {
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_map: ", what, " must be an array, got ", shape.ToString()));
  }
  if (spec.split_dim.has_value() && !spec.dims.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_map: ", what, " has both split_dim and dims"));
  }
  AxisSet all_axes;
  std::vector<bool> dim_seen(shape.rank(), false);
  for (const auto& [dim, axes] : spec.Resolve(mesh)) {
    if (dim < 0 || dim >= shape.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("shard_map: ", what, " ",
                                                     shape.ToString(), " has no dimension ",
                                                     dim, " to split over the mesh"));
    }
    if (dim_seen[dim]) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard_map: ", what, " splits dimension ", dim, " twice"));
    }
    dim_seen[dim] = true;
    all_axes.insert(all_axes.end(), axes.begin(), axes.end());
  }
  return CheckAxisSet(mesh, all_axes, absl::StrCat("shard_map: ", what));
}

HloSharding ShardingOf(const PartitionSpec& spec, int64_t rank, const Mesh& mesh) {
  return MeshSharding(mesh, rank, spec.Resolve(mesh));
}

}  // namespace

std::vector<std::pair<int64_t, AxisSet>> PartitionSpec::Resolve(const Mesh& mesh) const {
  std::vector<std::pair<int64_t, AxisSet>> out;
  if (split_dim.has_value()) {
    out.push_back({*split_dim, mesh.AllAxes()});
    return out;
  }
  for (const auto& [dim, axes] : dims) {
    if (!axes.empty()) out.push_back({dim, axes});
  }
  return out;
}

ReplicaGroups ShardMapContext::AxisGroups() const { return AxisGroups(mesh_.AllAxes()); }

ReplicaGroups ShardMapContext::AxisGroups(const AxisSet& axes) const {
  return mesh_.Groups(axes);
}

std::vector<XlaOp> ShardMapContext::AllReduce(absl::Span<const XlaOp> xs, HloOpcode op,
                                              const AxisSet& axes) {
  std::vector<XlaOp> out(xs.begin(), xs.end());
  if (xs.empty() || mesh_.Size(axes) == 1) return out;
  XlaBuilder* b = xs[0].builder();
  if (b == nullptr) {
    builder_->ReportError(absl::InvalidArgumentError("shard_map: collective of an invalid op"));
    return out;
  }
  auto all_reduce = [&](XlaOp x) {
    HloAttributes attrs;
    attrs.replica_groups = AxisGroups(axes);
    attrs.channel_id = b->NextChannelId();
    attrs.use_global_device_ids = true;
    HloComputation* reducer = b->ScalarReducer(op, x.shape().element_type());
    if (reducer == nullptr) return XlaOp();
    return b->AddOp(HloOpcode::kAllReduce, {x}, attrs, {reducer});
  };
  bool same_shape = true;
  for (const XlaOp& x : xs) same_shape &= x.valid() && x.shape() == xs[0].shape();
  if (xs.size() == 1 || !same_shape) {
    for (size_t i = 0; i < xs.size(); ++i) out[i] = all_reduce(xs[i]);
    return out;
  }
  // XLA's SPMD partitioner accepts only single-operand all-reduces in manual
  // code, so same-shaped operands travel stacked in one array.
  const std::vector<int64_t>& dims = xs[0].shape().dimensions();
  std::vector<int64_t> one_dims = {1};
  one_dims.insert(one_dims.end(), dims.begin(), dims.end());
  std::vector<XlaOp> rows;
  for (const XlaOp& x : xs) rows.push_back(b->Reshape(x, one_dims));
  XlaOp reduced = all_reduce(b->Concatenate(rows, 0));
  std::vector<int64_t> starts(one_dims.size(), 0), limits = one_dims,
      strides(one_dims.size(), 1);
  for (size_t i = 0; i < xs.size(); ++i) {
    starts[0] = static_cast<int64_t>(i);
    limits[0] = static_cast<int64_t>(i) + 1;
    out[i] = b->Reshape(b->Slice(reduced, starts, limits, strides), dims);
  }
  return out;
}

XlaOp ShardMapContext::Psum(XlaOp x) { return Psum(x, mesh_.AllAxes()); }
XlaOp ShardMapContext::Pmax(XlaOp x) { return Pmax(x, mesh_.AllAxes()); }
XlaOp ShardMapContext::Pmin(XlaOp x) {
  return AllReduce({x}, HloOpcode::kMinimum, mesh_.AllAxes())[0];
}
std::vector<XlaOp> ShardMapContext::Psum(absl::Span<const XlaOp> xs) {
  return Psum(xs, mesh_.AllAxes());
}
std::vector<XlaOp> ShardMapContext::Pmax(absl::Span<const XlaOp> xs) {
  return Pmax(xs, mesh_.AllAxes());
}
XlaOp ShardMapContext::Psum(XlaOp x, const AxisSet& axes) {
  return AllReduce({x}, HloOpcode::kAdd, axes)[0];
}
XlaOp ShardMapContext::Pmax(XlaOp x, const AxisSet& axes) {
  return AllReduce({x}, HloOpcode::kMaximum, axes)[0];
}
std::vector<XlaOp> ShardMapContext::Psum(absl::Span<const XlaOp> xs, const AxisSet& axes) {
  return AllReduce(xs, HloOpcode::kAdd, axes);
}
std::vector<XlaOp> ShardMapContext::Pmax(absl::Span<const XlaOp> xs, const AxisSet& axes) {
  return AllReduce(xs, HloOpcode::kMaximum, axes);
}

XlaOp ShardMapContext::AllGather(XlaOp x, int64_t dim) {
  return AllGather(x, dim, mesh_.AllAxes());
}

XlaOp ShardMapContext::AllGather(XlaOp x, int64_t dim, const AxisSet& axes) {
  if (mesh_.Size(axes) == 1) return x;
  XlaBuilder* b = x.builder() ? x.builder() : builder_;
  return b->AllGather(x, dim, AxisGroups(axes));
}

XlaOp ShardMapContext::PsumScatter(XlaOp x, int64_t dim) {
  return PsumScatter(x, dim, mesh_.AllAxes());
}

XlaOp ShardMapContext::PsumScatter(XlaOp x, int64_t dim, const AxisSet& axes) {
  if (mesh_.Size(axes) == 1) return x;
  XlaBuilder* b = x.builder() ? x.builder() : builder_;
  if (!x.valid()) return b->ReduceScatter(x, nullptr, dim, AxisGroups(axes));
  return b->ReduceScatter(x, b->ScalarReducer(HloOpcode::kAdd, x.shape().element_type()), dim,
                          AxisGroups(axes));
}

XlaOp ShardMapContext::Ppermute(XlaOp x, std::vector<std::pair<int64_t, int64_t>> perm) {
  XlaBuilder* b = x.builder() ? x.builder() : builder_;
  return b->CollectivePermute(x, std::move(perm));
}

XlaOp ShardMapContext::AxisIndex(XlaBuilder* b) { return AxisIndex(mesh_.AllAxes(), b); }

XlaOp ShardMapContext::AxisIndex(const AxisSet& axes, XlaBuilder* b) {
  if (b == nullptr) b = builder_;
  auto s32 = [b](int64_t v) { return b->ConstantS32(static_cast<int32_t>(v)); };
  if (mesh_.Size(axes) == 1) return s32(0);
  XlaOp pid;
  if (b == builder_ && partition_id_.valid()) {
    pid = partition_id_;
  } else {
    pid = b->Convert(b->PartitionId(), PrimitiveType::kS32);
    if (b == builder_) partition_id_ = pid;
  }
  if (axes == mesh_.AllAxes()) return pid;
  // Coordinate on axis a: (pid / stride_a) % size_a, strides row-major.
  XlaOp index;
  for (int64_t a : axes) {
    int64_t stride = 1;
    for (int64_t k = a + 1; k < mesh_.num_axes(); ++k) stride *= mesh_.axis_size(k);
    XlaOp c = pid;
    if (stride > 1) c = b->Binary(HloOpcode::kDivide, c, s32(stride));
    if (a > 0) c = b->Binary(HloOpcode::kRemainder, c, s32(mesh_.axis_size(a)));
    index = index.valid() ? Add(Mul(index, s32(mesh_.axis_size(a))), c) : c;
  }
  return index;
}

XlaOp ShardMapContext::ShardOffset(int64_t global_size, XlaBuilder* b) {
  return ShardOffset(global_size, mesh_.AllAxes(), b);
}

XlaOp ShardMapContext::ValidShardSize(int64_t global_size, XlaBuilder* b) {
  return ValidShardSize(global_size, mesh_.AllAxes(), b);
}

XlaOp ShardMapContext::ShardOffset(int64_t global_size, const AxisSet& axes, XlaBuilder* b) {
  if (b == nullptr) b = builder_;
  const int64_t width = ShardSize(global_size, mesh_.Size(axes));
  return Mul(AxisIndex(axes, b), b->ConstantS32(static_cast<int32_t>(width)));
}

XlaOp ShardMapContext::ValidShardSize(int64_t global_size, const AxisSet& axes,
                                      XlaBuilder* b) {
  if (b == nullptr) b = builder_;
  const int64_t width = ShardSize(global_size, mesh_.Size(axes));
  XlaOp rest = Sub(b->ConstantS32(static_cast<int32_t>(global_size)),
                   ShardOffset(global_size, axes, b));
  return b->Clamp(b->ConstantS32(0), rest, b->ConstantS32(static_cast<int32_t>(width)));
}

absl::StatusOr<std::unique_ptr<HloModule>> ShardMap(const std::string& module_name,
                                                    const Mesh& mesh,
                                                    absl::Span<const ShardMapInput> in_specs,
                                                    absl::Span<const ShardMapOutput> out_specs,
                                                    const ShardMapBody& body,
                                                    const ShardMapOptions& options) {
  RETURN_IF_ERROR(ValidateMesh(mesh));
  if (out_specs.empty()) return absl::InvalidArgumentError("shard_map: no outputs");

  // Inputs: per-device shapes and shardings.
  std::vector<Shape> local_in, global_in;
  std::vector<HloSharding> in_shardings;
  for (const ShardMapInput& in : in_specs) {
    const std::string what = absl::StrCat("input '", in.name, "'");
    RETURN_IF_ERROR(CheckSpec(in.spec, in.global_shape, mesh, what));
    Shape local(in.global_shape.element_type(), in.global_shape.dimensions());
    for (const auto& [dim, axes] : in.spec.Resolve(mesh)) {
      const int64_t n = mesh.Size(axes);
      const int64_t size = local.dimensions(dim);
      if (size % n != 0 && !in.spec.allow_padding) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shard_map: ", what, " dimension ", dim, " (size ", size,
            ") is not divisible by the mesh size ", n));
      }
      local.set_dimension(dim, ShardSize(size, n));
    }
    local_in.push_back(local);
    global_in.push_back(Shape(in.global_shape.element_type(), in.global_shape.dimensions()));
    in_shardings.push_back(ShardingOf(in.spec, local.rank(), mesh));
  }

  XlaBuilder b(module_name);
  std::vector<XlaOp> args;
  for (size_t i = 0; i < in_specs.size(); ++i) {
    const int64_t number = static_cast<int64_t>(i);
    if (!options.global_form) {
      XlaOp p = b.Parameter(number, local_in[i], in_specs[i].name);
      b.SetSharding(p, in_shardings[i]);
      args.push_back(p);
      continue;
    }
    XlaOp p = b.Parameter(number, global_in[i], in_specs[i].name);
    b.SetSharding(p, in_shardings[i]);
    XlaOp annotated = b.CustomCall("Sharding", {p}, global_in[i]);
    b.SetSharding(annotated, in_shardings[i]);
    XlaOp local = b.CustomCall("SPMDFullToShardShape", {annotated}, local_in[i]);
    b.SetSharding(local, HloSharding::Manual());
    args.push_back(local);
  }

  ShardMapContext ctx(&b, mesh);
  std::vector<XlaOp> outs = body(ctx, args);
  if (!b.first_error().ok()) return b.first_error();
  if (outs.size() != out_specs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("shard_map: the body returned ",
                                                   outs.size(), " outputs for ",
                                                   out_specs.size(), " output specs"));
  }

  std::vector<XlaOp> results;
  std::vector<Shape> global_out;
  std::vector<HloSharding> out_shardings;
  std::vector<std::string> names;
  for (size_t j = 0; j < outs.size(); ++j) {
    const ShardMapOutput& spec = out_specs[j];
    const std::string what = absl::StrCat("output '", spec.name, "'");
    if (!outs[j].valid()) {
      return absl::InternalError(absl::StrCat("shard_map: ", what, " was not emitted"));
    }
    const Shape& local = outs[j].shape();
    RETURN_IF_ERROR(CheckSpec(spec.spec, local, mesh, what));
    Shape global(local.element_type(), local.dimensions());
    for (const auto& [dim, axes] : spec.spec.Resolve(mesh)) {
      const int64_t n = mesh.Size(axes);
      int64_t size = local.dimensions(dim) * n;
      int64_t given = spec.spec.split_dim.has_value() ? spec.global_split_size : 0;
      for (const auto& [d, s] : spec.global_sizes) {
        if (d == dim) given = s;
      }
      if (given > 0) {
        size = given;
        if (ShardSize(size, n) != local.dimensions(dim)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "shard_map: ", what, " has ", local.dimensions(dim), " elements per device in ",
              "dimension ", dim, ", but a global size of ", size, " over ", n,
              " shards gives ", ShardSize(size, n)));
        }
      }
      global.set_dimension(dim, size);
    }
    const HloSharding sharding = ShardingOf(spec.spec, local.rank(), mesh);
    XlaOp result = outs[j];
    if (options.global_form) {
      XlaOp manual = b.CustomCall("Sharding", {result}, local);
      b.SetSharding(manual, HloSharding::Manual());
      result = b.CustomCall("SPMDShardToFullShape", {manual}, global);
      b.SetSharding(result, sharding);
    }
    b.SetOpName(result, spec.name);
    results.push_back(result);
    global_out.push_back(global);
    out_shardings.push_back(sharding);
    names.push_back(spec.name);
  }

  XlaOp root = results.size() == 1 ? results[0] : b.Tuple(results);
  if (results.size() == 1) {
    b.SetSharding(root, out_shardings[0]);
  } else {
    HloSharding tuple;
    tuple.type = HloSharding::Type::kTuple;
    tuple.tuple_shardings = out_shardings;
    b.SetSharding(root, tuple);
  }
  // The device count first: the verifier checks replica groups against it.
  b.module()->set_num_partitions(mesh.num_devices);
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> module, b.Build(root));
  module->SetOutputNames(names);
  if (!options.global_form) {
    (*module->mutable_frontend_attributes())[std::string(kGlobalParameterShapesAttr)] =
        EncodeShapeList(global_in);
    (*module->mutable_frontend_attributes())[std::string(kGlobalOutputShapesAttr)] =
        EncodeShapeList(global_out);
  }
  if (mesh.num_axes() > 1) {
    (*module->mutable_frontend_attributes())[std::string(kMeshShapeAttr)] = mesh.ShapeString();
  }
  return module;
}

}  // namespace tpuoff::hlo
