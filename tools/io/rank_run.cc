#include "tools/io/rank_run.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/device/sharding_io.h"
#include "tools/io/input_loader.h"
#include "tools/io/npy.h"

namespace tpuoff::tools {
namespace {

void PutInt(std::string* out, int64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

void PutBytes(std::string* out, const void* data, int64_t n) {
  PutInt(out, n);
  out->append(static_cast<const char*>(data), static_cast<size_t>(n));
}

// Reads what PutInt/PutBytes wrote; every read is bounds-checked.
class Reader {
 public:
  Reader(const std::string& bytes, int rank) : bytes_(bytes), rank_(rank) {}
  absl::StatusOr<int64_t> Int() {
    if (at_ + 8 > bytes_.size()) return Short();
    int64_t v;
    std::memcpy(&v, bytes_.data() + at_, 8);
    at_ += 8;
    return v;
  }
  absl::StatusOr<absl::string_view> Bytes() {
    ASSIGN_OR_RETURN(int64_t n, Int());
    if (n < 0 || at_ + static_cast<size_t>(n) > bytes_.size()) return Short();
    absl::string_view v(bytes_.data() + at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return v;
  }

 private:
  absl::Status Short() const {
    return absl::DataLossError(absl::StrCat("rank ", rank_, " sent a truncated result"));
  }
  const std::string& bytes_;
  int rank_;
  size_t at_ = 0;
};

// A rank's devices: reports and outputs.
std::string PackRank(const runtime::RunResult& r, int64_t outputs_per_device) {
  std::string out;
  PutInt(&out, static_cast<int64_t>(r.devices.size()));
  for (size_t d = 0; d < r.devices.size(); ++d) {
    const runtime::DeviceReport& dev = r.devices[d];
    PutInt(&out, dev.device_id);
    PutBytes(&out, dev.name.data(), static_cast<int64_t>(dev.name.size()));
    PutInt(&out, dev.hbm_capacity_bytes);
    PutInt(&out, dev.stats.bytes_in_use);
    PutInt(&out, dev.stats.peak_bytes);
    PutInt(&out, dev.stats.num_allocs);
    PutInt(&out, dev.stats.largest_alloc);
    for (int64_t i = 0; i < outputs_per_device; ++i) {
      const hlo::Literal& lit = r.outputs[d * outputs_per_device + i];
      PutBytes(&out, lit.raw(), lit.raw_size());
    }
  }
  return out;
}

// Appends rank `rank`'s devices to `all` (output shapes from `shapes`).
absl::Status UnpackRank(const std::string& bytes, int rank, const std::vector<hlo::Shape>& shapes,
                        runtime::RunResult* all) {
  Reader in(bytes, rank);
  ASSIGN_OR_RETURN(int64_t n, in.Int());
  for (int64_t d = 0; d < n; ++d) {
    runtime::DeviceReport dev;
    ASSIGN_OR_RETURN(dev.device_id, in.Int());
    ASSIGN_OR_RETURN(absl::string_view name, in.Bytes());
    dev.name = std::string(name);
    ASSIGN_OR_RETURN(dev.hbm_capacity_bytes, in.Int());
    ASSIGN_OR_RETURN(dev.stats.bytes_in_use, in.Int());
    ASSIGN_OR_RETURN(dev.stats.peak_bytes, in.Int());
    ASSIGN_OR_RETURN(dev.stats.num_allocs, in.Int());
    ASSIGN_OR_RETURN(dev.stats.largest_alloc, in.Int());
    all->devices.push_back(std::move(dev));
    for (const hlo::Shape& shape : shapes) {
      ASSIGN_OR_RETURN(absl::string_view data, in.Bytes());
      hlo::Literal lit(shape);
      if (static_cast<int64_t>(data.size()) != lit.raw_size()) {
        return absl::DataLossError(absl::StrCat("rank ", rank, " sent ", data.size(),
                                                " bytes for an output of ", shape.ToString()));
      }
      if (!data.empty()) std::memcpy(lit.raw(), data.data(), data.size());
      all->outputs.push_back(std::move(lit));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<runtime::DeviceBlock> LocalDevices(int64_t num_devices) {
  if (!runtime::Distributed()) return runtime::DeviceBlock{0, num_devices};
  return runtime::DeviceBlockOf(num_devices, runtime::WorldRank());
}

absl::StatusOr<std::vector<std::vector<hlo::Literal>>> LoadLocalShards(
    const hlo::PartitionedSignature& sig, const hlo::HloComputation& params,
    const std::string& dir, runtime::DeviceBlock block) {
  const std::vector<std::string> files = InputFileNames(params);
  std::vector<std::vector<hlo::Literal>> per_device(block.count);
  for (size_t i = 0; i < sig.global_parameters.size(); ++i) {
    const std::string path = absl::StrCat(dir, "/", files[i]);
    const hlo::Shape& global = sig.global_parameters[i];
    const hlo::Shape& local = sig.local_parameters[i];
    for (int64_t d = 0; d < block.count; ++d) {
      ASSIGN_OR_RETURN(runtime::PieceBox box,
                       runtime::PieceBoxOf(sig.parameter_shardings[i], global, local,
                                           block.first + d));
      absl::StatusOr<hlo::Literal> piece =
          ReadNpyBox(path, global, box.origin, box.extent, box.dims, local);
      if (!piece.ok()) {
        return absl::Status(piece.status().code(),
                            absl::StrCat("parameter ", sig.parameter_names[i], " (device ",
                                         block.first + d, "): ", piece.status().message(),
                                         "\nexpected parameters:\n", ExpectedParametersText(params)));
      }
      per_device[d].push_back(*std::move(piece));
    }
  }
  return per_device;
}

absl::StatusOr<runtime::RunResult> RunOnRanks(
    const hlo::HloModule& module, const std::vector<std::vector<hlo::Literal>>& local_arguments,
    const runtime::RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = std::max<int64_t>(module.num_partitions(), 1);
  ASSIGN_OR_RETURN(runtime::DeviceBlock block, LocalDevices(n));
  if (static_cast<int64_t>(local_arguments.size()) != block.count) {
    return absl::InternalError(absl::StrCat("rank ", runtime::WorldRank(), " has ",
                                            local_arguments.size(), " argument sets for ",
                                            block.count, " devices"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::CollectiveBackend> backend,
                   runtime::MakeMpiCollectives(n, runtime::CollectiveGroups(module, n),
                                               options.collective_timeout_seconds));
  runtime::RunOptions o = options;
  o.first_device = block.first;
  o.mesh_devices = n;
  o.record_trace = false;
  o.record_allocations = false;
  ASSIGN_OR_RETURN(runtime::RunResult local, runtime::RunSpmd(module, local_arguments, o,
                                                              backend.get()));
  backend.reset();
  const int64_t per_device = static_cast<int64_t>(local.outputs.size()) / block.count;
  std::vector<hlo::Shape> shapes;
  for (int64_t i = 0; i < per_device; ++i) shapes.push_back(local.outputs[i].shape());
  // Rank 0 keeps its own devices' results as they are and unpacks the
  // others' one rank at a time.
  runtime::RunResult result;
  std::string mine;
  if (runtime::WorldRank() == 0) {
    result.devices = std::move(local.devices);
    result.outputs = std::move(local.outputs);
  } else {
    mine = PackRank(local, per_device);
  }
  local = runtime::RunResult();
  RETURN_IF_ERROR(runtime::SendToRoot(mine, [&](int rank, std::string bytes) {
    return UnpackRank(bytes, rank, shapes, &result);
  }));
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tpuoff::tools
