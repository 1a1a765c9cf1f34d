// The collective backend across MPI ranks (runtime/device/process_world.h).
//
// A collective first gathers this rank's members at a local rendezvous
// (devices take turns on a few threads, so the executor's devices never
// block on MPI). When the last local member arrives, a group that spans
// other ranks goes to the progress thread — the only thread that calls MPI
// while devices run — which sends the local members' inputs to every other
// rank of the group and receives theirs (nonblocking point-to-point on the
// group's own communicator, in pieces below MPI's int counts), polls, and
// then combines every member's inputs in group order exactly as
// InProcessCollectives does, writing only the local members' outputs.
// MPI has no timeouts: a collective whose remote parts have not all arrived
// after the timeout fails naming the ranks and devices that never sent.
#ifdef TPUOFF_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/device/process_world.h"

namespace tpuoff::runtime {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kCollectiveTag = 7001;
constexpr int64_t kPiece = int64_t{1} << 30;

std::string Join(const std::vector<int64_t>& v) { return absl::StrJoin(v, ","); }

// One execution of one collective on this rank.
struct Rendezvous {
  std::string key;
  std::string op_name, call_key;
  std::vector<int64_t> group;
  std::vector<CollectiveOp> ops;
  std::vector<bool> local;  // per member: held by this rank
  std::vector<std::vector<CollectiveLeaf>> leaves;
  std::vector<CollectiveDone> done;
  std::vector<bool> arrived;
  int64_t local_count = 0, num_arrived = 0;
  Clock::time_point first_arrival;
  // The exchange (progress thread only).
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> peers;                      // comm ranks of the other ranks
  std::vector<int> peer_world;                 // their world ranks
  std::string send;                            // local members' inputs
  std::vector<std::string> recv;               // per peer: its members' inputs
  std::vector<std::vector<MPI_Request>> recv_requests;  // per peer
  std::vector<MPI_Request> send_requests;
  Clock::time_point posted;
};

class MpiCollectives : public CollectiveBackend {
 public:
  MpiCollectives(int64_t num_devices, double timeout)
      : num_devices_(num_devices), timeout_(timeout), rank_(WorldRank()) {}

  ~MpiCollectives() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    // Communicators with exchanges never finished (a failed run, which
    // aborts the job) are left to MPI_Abort.
    if (abandoned_.empty()) {
      for (auto& [group, comm] : comms_) MPI_Comm_free(&comm);
    }
  }

  absl::Status MakeCommunicators(const std::vector<std::vector<int64_t>>& groups) {
    std::set<std::vector<int64_t>> distinct(groups.begin(), groups.end());
    for (const std::vector<int64_t>& g : distinct) {
      std::set<int> ranks;
      for (int64_t d : g) ranks.insert(RankOfDevice(d, num_devices_));
      if (ranks.size() < 2) continue;  // one rank: combined locally
      const bool member = ranks.count(rank_) > 0;
      MPI_Comm comm = MPI_COMM_NULL;
      if (int rc = MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, rank_, &comm); rc) {
        return absl::InternalError(absl::StrCat("rank ", rank_, ": MPI_Comm_split for group {",
                                                Join(g), "} failed (MPI error ", rc, ")"));
      }
      if (member) comms_[g] = comm;
    }
    thread_ = std::thread([this] { Progress(); });
    return absl::OkStatus();
  }

  int64_t num_devices() const override { return num_devices_; }

  absl::StatusOr<bool> Submit(const CollectiveCall& call, const std::vector<CollectiveOp>& ops,
                              const std::vector<CollectiveLeaf>& leaves,
                              CollectiveDone done) override {
    if (absl::Status s = Validate(call); !s.ok()) return s;
    if (ops.size() != leaves.size()) {
      return absl::InternalError(absl::StrCat("collective %", call.op_name, ": ", ops.size(),
                                              " ops for ", leaves.size(), " leaves"));
    }
    const std::string key = absl::StrCat(call.key, "|", Join(call.group));
    std::shared_ptr<Rendezvous> rv;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!abort_status_.ok()) return abort_status_;
      std::shared_ptr<Rendezvous>& slot = local_[key];
      if (slot == nullptr) slot = NewRendezvous(key, call, ops);
      Rendezvous& r = *slot;
      const size_t pos = std::find(r.group.begin(), r.group.end(), call.device) - r.group.begin();
      if (r.arrived[pos]) {
        return absl::InternalError(absl::StrCat("device ", call.device, " entered collective %",
                                                call.op_name, " twice"));
      }
      if (r.ops.size() != ops.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device ", call.device, ": collective %", call.op_name, " has ", ops.size(),
            " leaves here but ", r.ops.size(), " on another device"));
      }
      r.arrived[pos] = true;
      r.leaves[pos] = leaves;
      r.done[pos] = std::move(done);
      if (++r.num_arrived < r.local_count) return false;
      rv = slot;
      local_.erase(key);
      if (!rv->peers.empty()) {
        exchanges_.fetch_add(1);
        ready_.push_back(rv);  // the progress thread exchanges and completes it
        cv_.notify_all();
        return false;
      }
    }
    // Every member is on this rank.
    Combine(*rv, nullptr);
    for (size_t m = 0; m < rv->group.size(); ++m) {
      if (rv->group[m] != call.device && rv->done[m]) rv->done[m](absl::OkStatus());
    }
    return true;
  }

  void Abort(int64_t device, const absl::Status& reason) override {
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abort_status_.ok()) {
        abort_status_ = absl::AbortedError(absl::StrCat(
            "collective aborted: device ", device, " failed: ", reason.message()));
      }
      status = abort_status_;
    }
    FailLocal([&](const Rendezvous&) { return status; });
  }

  void ExpireStale() override {
    const Clock::time_point now = Clock::now();
    FailLocal([&](const Rendezvous& rv) {
      if (now - rv.first_arrival <= Limit()) return absl::OkStatus();
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, ": collective %", rv.op_name, " (", rv.call_key,
          ") did not complete in ", timeout_, "s: ", LocalWaitingText(rv)));
    });
  }

  void FailPending() override {
    // No local device can run. While an exchange with other ranks is under
    // way its devices will wake, so nothing is stuck yet; otherwise only
    // this rank's missing members can be at fault (the other ranks' have
    // the exchange's deadline).
    // An exchange that just completed may have woken a device the
    // scheduler has not run yet: only a second call with no completion in
    // between (the scheduler calls again after running what woke) fails.
    if (exchanges_.load() > 0) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t c = completions_.load();
      if (c != completions_seen_) {
        completions_seen_ = c;
        return;
      }
    }
    FailLocal([&](const Rendezvous& rv) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", rank_, ": collective %", rv.op_name, " (", rv.call_key,
          ") can never complete: ", LocalWaitingText(rv),
          ", which finished or wait at another collective"));
    });
  }

 private:
  Clock::duration Limit() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  }

  absl::Status Validate(const CollectiveCall& call) const {
    std::set<int64_t> seen;
    bool member = false;
    for (int64_t d : call.group) {
      if (d < 0 || d >= num_devices_) {
        return absl::InvalidArgumentError(
            absl::StrCat("device ", call.device, ": collective %", call.op_name, " names device ",
                         d, " but the mesh has ", num_devices_, " device(s)"));
      }
      if (!seen.insert(d).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device ", call.device, ": collective %", call.op_name, " lists device ", d,
            " twice in its group"));
      }
      member |= d == call.device;
    }
    if (!member) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", call.device, ": collective %", call.op_name,
          " called by a device outside its group {", Join(call.group), "}"));
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Rendezvous> NewRendezvous(const std::string& key, const CollectiveCall& call,
                                            const std::vector<CollectiveOp>& ops) {
    auto r = std::make_shared<Rendezvous>();
    r->key = key;
    r->op_name = call.op_name;
    r->call_key = call.key;
    r->group = call.group;
    r->ops = ops;
    const size_t g = call.group.size();
    r->leaves.resize(g);
    r->done.resize(g);
    r->arrived.assign(g, false);
    r->local.assign(g, false);
    std::set<int> remote;
    for (size_t m = 0; m < g; ++m) {
      const int owner = RankOfDevice(call.group[m], num_devices_);
      r->local[m] = owner == rank_;
      r->local_count += r->local[m] ? 1 : 0;
      if (owner != rank_) remote.insert(owner);
    }
    r->first_arrival = Clock::now();
    if (!remote.empty()) {
      auto it = comms_.find(call.group);
      r->comm = it == comms_.end() ? MPI_COMM_NULL : it->second;
      // Comm ranks follow world ranks (MPI_Comm_split keyed by world rank).
      std::set<int> all = remote;
      all.insert(rank_);
      for (int w : remote) {
        r->peers.push_back(static_cast<int>(std::distance(all.begin(), all.find(w))));
        r->peer_world.push_back(w);
      }
    }
    return r;
  }

  std::string LocalWaitingText(const Rendezvous& rv) const {
    std::vector<int64_t> waiting, missing;
    for (size_t i = 0; i < rv.group.size(); ++i) {
      if (rv.local[i]) (rv.arrived[i] ? waiting : missing).push_back(rv.group[i]);
    }
    return absl::StrCat("devices {", Join(waiting), "} are waiting for devices {", Join(missing),
                        "}");
  }

  void FailLocal(const std::function<absl::Status(const Rendezvous&)>& pick) {
    std::vector<std::pair<std::shared_ptr<Rendezvous>, absl::Status>> failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = local_.begin(); it != local_.end();) {
        absl::Status why = pick(*it->second);
        if (why.ok()) {
          ++it;
          continue;
        }
        failed.push_back({it->second, why});
        it = local_.erase(it);
      }
      if (!abort_status_.ok()) {
        // Queued for the exchange but not posted yet: never will be.
        for (auto& rv : ready_) failed.push_back({rv, abort_status_});
        exchanges_.fetch_sub(static_cast<int64_t>(ready_.size()));
        ready_.clear();
      }
    }
    for (auto& [rv, why] : failed) CompleteLocal(*rv, why);
  }

  static void CompleteLocal(Rendezvous& rv, const absl::Status& status) {
    for (size_t m = 0; m < rv.group.size(); ++m) {
      if (rv.arrived[m] && rv.done[m]) rv.done[m](status);
      rv.done[m] = nullptr;
    }
  }

  // The members' inputs of leaf `l`: local ones from their buffers, remote
  // ones from what their ranks sent (peer order, members in group order,
  // leaves in order within a member).
  void Combine(const Rendezvous& rv, const std::vector<const uint8_t*>* remote_base) {
    const size_t g = rv.group.size();
    std::vector<const uint8_t*> cursor;
    if (remote_base != nullptr) cursor = *remote_base;
    std::vector<std::vector<const void*>> ins(rv.ops.size(), std::vector<const void*>(g));
    for (size_t m = 0; m < g; ++m) {
      if (rv.local[m]) {
        for (size_t l = 0; l < rv.ops.size(); ++l) ins[l][m] = rv.leaves[m][l].in;
        continue;
      }
      const int owner = RankOfDevice(rv.group[m], num_devices_);
      const size_t p = std::find(rv.peer_world.begin(), rv.peer_world.end(), owner) -
                       rv.peer_world.begin();
      for (size_t l = 0; l < rv.ops.size(); ++l) {
        ins[l][m] = cursor[p];
        cursor[p] += CollectiveInputBytes(rv.ops[l], static_cast<int64_t>(g));
      }
    }
    for (size_t l = 0; l < rv.ops.size(); ++l) {
      std::vector<void*> outs(g, nullptr);
      for (size_t m = 0; m < g; ++m) {
        if (rv.local[m]) outs[m] = rv.leaves[m][l].out;
      }
      PerformCollectiveLeaf(rv.ops[l], rv.group, ins[l], outs);
    }
  }

  // Bytes one member contributes (all leaves).
  int64_t MemberBytes(const Rendezvous& rv) const {
    int64_t b = 0;
    for (const CollectiveOp& op : rv.ops) {
      b += CollectiveInputBytes(op, static_cast<int64_t>(rv.group.size()));
    }
    return b;
  }

  absl::Status Post(Rendezvous& rv) {
    if (rv.comm == MPI_COMM_NULL) {
      return absl::InternalError(absl::StrCat("rank ", rank_, ": collective %", rv.op_name,
                                              ": no communicator for group {", Join(rv.group),
                                              "} (not among the module's collectives)"));
    }
    const int64_t per_member = MemberBytes(rv);
    const size_t g = rv.group.size();
    rv.send.reserve(static_cast<size_t>(per_member * rv.local_count));
    for (size_t m = 0; m < g; ++m) {
      if (!rv.local[m]) continue;
      for (size_t l = 0; l < rv.ops.size(); ++l) {
        const int64_t b = CollectiveInputBytes(rv.ops[l], static_cast<int64_t>(g));
        if (b > 0) rv.send.append(static_cast<const char*>(rv.leaves[m][l].in), b);
      }
    }
    rv.recv.resize(rv.peers.size());
    rv.recv_requests.resize(rv.peers.size());
    for (size_t p = 0; p < rv.peers.size(); ++p) {
      int64_t members = 0;
      for (size_t m = 0; m < g; ++m) {
        members += RankOfDevice(rv.group[m], num_devices_) == rv.peer_world[p] ? 1 : 0;
      }
      rv.recv[p].resize(static_cast<size_t>(per_member * members));
      for (int64_t at = 0; at < static_cast<int64_t>(rv.recv[p].size()); at += kPiece) {
        MPI_Request req;
        const int n = static_cast<int>(std::min<int64_t>(kPiece, rv.recv[p].size() - at));
        if (int rc = MPI_Irecv(rv.recv[p].data() + at, n, MPI_BYTE, rv.peers[p], kCollectiveTag,
                               rv.comm, &req);
            rc) {
          return absl::InternalError(absl::StrCat("rank ", rank_, ": MPI_Irecv failed (", rc, ")"));
        }
        rv.recv_requests[p].push_back(req);
      }
      for (int64_t at = 0; at < static_cast<int64_t>(rv.send.size()); at += kPiece) {
        MPI_Request req;
        const int n = static_cast<int>(std::min<int64_t>(kPiece, rv.send.size() - at));
        if (int rc = MPI_Isend(rv.send.data() + at, n, MPI_BYTE, rv.peers[p], kCollectiveTag,
                               rv.comm, &req);
            rc) {
          return absl::InternalError(absl::StrCat("rank ", rank_, ": MPI_Isend failed (", rc, ")"));
        }
        rv.send_requests.push_back(req);
      }
    }
    rv.posted = Clock::now();
    return absl::OkStatus();
  }

  // True when every receive and send of `rv` finished.
  static bool Test(Rendezvous& rv) {
    bool all = true;
    for (auto& reqs : rv.recv_requests) {
      int flag = 1;
      if (!reqs.empty()) MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag,
                                     MPI_STATUSES_IGNORE);
      all &= flag != 0;
    }
    int flag = 1;
    if (!rv.send_requests.empty()) {
      MPI_Testall(static_cast<int>(rv.send_requests.size()), rv.send_requests.data(), &flag,
                  MPI_STATUSES_IGNORE);
    }
    return all && flag != 0;
  }

  static bool Received(const std::vector<MPI_Request>& reqs) {
    for (const MPI_Request& r : reqs) {
      if (r != MPI_REQUEST_NULL) return false;
    }
    return true;
  }

  std::string MissingText(const Rendezvous& rv) const {
    std::vector<std::string> parts;
    for (size_t p = 0; p < rv.peers.size(); ++p) {
      if (Received(rv.recv_requests[p])) continue;
      std::vector<int64_t> devs;
      for (int64_t d : rv.group) {
        if (RankOfDevice(d, num_devices_) == rv.peer_world[p]) devs.push_back(d);
      }
      parts.push_back(absl::StrCat("rank ", rv.peer_world[p], " (devices {", Join(devs), "})"));
    }
    std::vector<int64_t> mine;
    for (size_t m = 0; m < rv.group.size(); ++m) {
      if (rv.local[m]) mine.push_back(rv.group[m]);
    }
    return absl::StrCat("rank ", rank_, " (devices {", Join(mine), "}) waited for ",
                        parts.empty() ? std::string("its sends to finish")
                                      : absl::StrJoin(parts, ", "),
                        ", which never sent its part");
  }

  // The progress thread: posts queued exchanges, polls the posted ones,
  // completes or expires them.
  void Progress() {
    std::vector<std::shared_ptr<Rendezvous>> posted;
    int idle_polls = 0;
    while (true) {
      std::deque<std::shared_ptr<Rendezvous>> fresh;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (stop_) return;
        if (ready_.empty() && posted.empty()) {
          cv_.wait_for(lock, std::chrono::milliseconds(20));
          continue;
        }
        fresh.swap(ready_);
      }
      for (auto& rv : fresh) {
        if (absl::Status s = Post(*rv); !s.ok()) {
          exchanges_.fetch_sub(1);
          CompleteLocal(*rv, s);
          abandoned_.push_back(rv);
          continue;
        }
        posted.push_back(rv);
      }
      bool progressed = false;
      const Clock::time_point now = Clock::now();
      for (auto it = posted.begin(); it != posted.end();) {
        Rendezvous& rv = **it;
        if (Test(rv)) {
          std::vector<const uint8_t*> base;
          for (const std::string& r : rv.recv) base.push_back(reinterpret_cast<const uint8_t*>(r.data()));
          Combine(rv, &base);
          CompleteLocal(rv, absl::OkStatus());
          completions_.fetch_add(1);
          exchanges_.fetch_sub(1);
          it = posted.erase(it);
          progressed = true;
          continue;
        }
        if (now - rv.posted > Limit()) {
          exchanges_.fetch_sub(1);
          CompleteLocal(rv, absl::DeadlineExceededError(absl::StrCat(
                                "collective %", rv.op_name, " (", rv.call_key, ") over devices {",
                                Join(rv.group), "} did not complete in ", timeout_, "s: ",
                                MissingText(rv))));
          abandoned_.push_back(*it);  // its buffers stay while MPI may touch them
          it = posted.erase(it);
          continue;
        }
        ++it;
      }
      // Poll quickly while exchanges flow, back off to 1 ms while waiting
      // (the devices' threads need the cores).
      idle_polls = progressed ? 0 : std::min(idle_polls + 1, 20);
      if (!posted.empty()) {
        std::this_thread::sleep_for(std::chrono::microseconds(idle_polls < 10 ? 20 : 1000));
      }
    }
  }

  int64_t num_devices_;
  double timeout_;
  int rank_;
  std::map<std::vector<int64_t>, MPI_Comm> comms_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  absl::Status abort_status_;
  std::map<std::string, std::shared_ptr<Rendezvous>> local_;
  std::deque<std::shared_ptr<Rendezvous>> ready_;
  std::atomic<int64_t> exchanges_{0};  // queued or posted, not completed
  std::atomic<int64_t> completions_{0};  // exchanges completed
  int64_t completions_seen_ = -1;        // by FailPending (under mu_)
  std::vector<std::shared_ptr<Rendezvous>> abandoned_;  // progress thread only
};

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeMpiCollectives(
    int64_t num_devices, const std::vector<std::vector<int64_t>>& groups,
    double timeout_seconds) {
  auto backend = std::make_unique<MpiCollectives>(num_devices, timeout_seconds);
  if (absl::Status s = backend->MakeCommunicators(groups); !s.ok()) return s;
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

}  // namespace tpuoff::runtime

#endif  // TPUOFF_HAVE_MPI
