// The store's writes (contract in store.h): each public call is one transaction under the
// store's lock (Store::Impl::write); leases are taken in one BEGIN IMMEDIATE transaction, so that
// processes meeting the same miss elect one tuner.

#include <cmath>

#include "cache/store_impl.h"
#include "core/hash.h"

namespace kvtune::cache {
namespace {

using internal::Call;
using internal::Database;
using internal::image_intact;
using internal::read_binary;
using internal::Statement;
using internal::unix_now;

// The image hash to store: the caller's, which must match the image, or computed when empty.
std::string checked_image_hash(const Binary& binary, const Call& call) {
  const std::string actual = detail::hash_hex(binary.image);
  if (binary.hash.empty() || (!binary.image_hash.empty() && binary.image_hash != actual)) {
    throw Error(Error::Context{"cache", call.problem, "", call.device, ""},
                std::string(call.operation) + ": binary '" + binary.hash + "' " +
                    (binary.hash.empty() ? "has no hash"
                                         : "has image_hash " + binary.image_hash +
                                               " but its image hashes to " + actual));
  }
  return actual;
}

void write_binary(Database& db, const Binary& binary, const std::string& image_hash,
                  const Call& call) {
  Statement(db, sql::kPutBinary, call)
      .bind_text(1, binary.hash)
      .bind_text(2, binary.arch)
      .bind_text(3, binary.lowered_name)
      .bind_blob(4, binary.image)
      .bind_text(5, image_hash)
      .bind_int(6, unix_now())
      .run();
}

// put_binary's rule: whatever differs is overwritten.
void insert_binary(Database& db, const Binary& binary, const Call& call) {
  write_binary(db, binary, checked_image_hash(binary, call), call);
}

// put_binaries' rule: an intact row of the same hash is the same cubin and stays as it is; a
// missing one is inserted and a damaged one replaced.
void keep_or_insert_binary(Database& db, const Binary& binary, const Call& call) {
  const std::string image_hash = checked_image_hash(binary, call);
  {
    Statement select(db, sql::kSelectBinary, call);
    select.bind_text(1, binary.hash);
    if (select.step() && image_intact(read_binary(select))) return;
  }
  write_binary(db, binary, image_hash, call);
}

void insert_tuning_run(Database& db, const TuningRun& run, const Call& call) {
  Statement(db, sql::kInsertTuningRun, call)
      .bind_text(1, run.op)
      .bind_text(2, run.problem_key)
      .bind_text(3, run.device_id)
      .bind_text(4, run.template_hash)
      .bind_int(5, run.started_at != 0 ? run.started_at : unix_now())
      .bind_real(6, run.wall_seconds)
      .bind_real(7, run.compile_seconds)
      .bind_real(8, run.bench_seconds)
      .bind_int(9, run.variants_total)
      .bind_int(10, run.variants_timed)
      .bind_int(11, run.compiles)
      .bind_int(12, run.binaries_reused)
      .bind_text(13, run.search)
      .bind_int(14, run.sm_clock_mhz)
      .bind_int(15, run.mem_clock_mhz)
      .bind_int(16, run.temperature_c)
      .bind_real(17, run.power_w)
      .bind_text(18, run.winner_label)
      .bind_real(19, run.winner_ms)
      .bind_text(20, run.incumbent_label)
      .bind_real(21, run.incumbent_ms)
      .bind_int(22, run.replaced_incumbent ? 1 : 0)
      .bind_text(23, run.json)
      .run();
}

// The run put_result stores: empty key fields are the winner's; other values must be.
TuningRun run_of(const Winner& winner, TuningRun run, const Call& call) {
  const auto take = [&](std::string& field, const std::string& value, const char* name) {
    if (field.empty()) field = value;
    if (field == value) return;
    throw Error(Error::Context{"cache", call.problem, "", call.device, ""},
                std::string(call.operation) + ": the tuning run's " + name + " '" + field +
                    "' is not the winner's '" + value + "'");
  };
  take(run.op, winner.op, "op");
  take(run.problem_key, winner.problem_key, "problem_key");
  take(run.device_id, winner.device_id, "device_id");
  take(run.template_hash, winner.template_hash, "template_hash");
  return run;
}

}  // namespace

void Store::put_device(const DeviceRow& device) {
  const Call call{"put_device", "", device.id};
  impl_->write(call, [&](Database& db) {
    Statement(db, sql::kUpsertDevice, call)
        .bind_text(1, device.id)
        .bind_text(2, device.name)
        .bind_int(3, device.cc_major)
        .bind_int(4, device.cc_minor)
        .bind_int(5, device.sm_count)
        .bind_int(6, device.l2_bytes)
        .bind_int(7, device.memory_bytes)
        .bind_int(8, device.driver_version)
        .bind_int(9, device.nvrtc_version)
        .bind_text(10, device.kvtune_version)
        .bind_text(11, device.json)
        .bind_int(12, device.updated_at != 0 ? device.updated_at : unix_now())
        .run();
  });
}

void Store::put_ceilings(const Ceilings& ceilings) {
  const Call call{"put_ceilings", "", ceilings.device_id};
  impl_->write(call, [&](Database& db) {
    Statement(db, sql::kUpsertCeilings, call)
        .bind_text(1, ceilings.device_id)
        .bind_real(2, ceilings.copy_gbps)
        .bind_real(3, ceilings.fma_gflops)
        .bind_int(4, ceilings.measured_at != 0 ? ceilings.measured_at : unix_now())
        .run();
  });
}

void Store::put_result(const Winner& winner, const std::optional<Binary>& binary,
                       const std::vector<Trial>& trials) {
  put_result(winner, binary ? std::vector<Binary>{*binary} : std::vector<Binary>{}, trials,
             std::nullopt);
}

void Store::put_result(const Winner& winner, const std::vector<Binary>& binaries,
                       const std::vector<Trial>& trials, const std::optional<TuningRun>& run) {
  const Call call{"put_result", winner.problem_key, winner.device_id};
  const std::int64_t now = unix_now();
  const std::optional<TuningRun> stored_run =
      run ? std::optional<TuningRun>(run_of(winner, *run, call)) : std::nullopt;
  impl_->write(call, [&](Database& db) {
    for (const Binary& binary : binaries) keep_or_insert_binary(db, binary, call);
    Statement(db, sql::kUpsertWinner, call)
        .bind_entry(winner.problem_key, winner.device_id, winner.template_hash)
        .bind_text(4, winner.op)
        .bind_text(5, winner.label)
        .bind_text(6, winner.config_json)
        .bind_text(7, winner.binary_hash)
        .bind_text(8, winner.origin)
        .bind_real(9, winner.median_ms)
        .bind_real(10, winner.gbps)
        .bind_int(11, winner.created_at != 0 ? winner.created_at : now)
        .run();
    for (const Trial& trial : trials) {
      Statement(db, sql::kInsertTrial, call)
          .bind_entry(winner.problem_key, winner.device_id, winner.template_hash)
          .bind_text(4, trial.label)
          .bind_text(5, trial.config_json)
          .bind_text(6, trial.status)
          .bind_text(7, trial.message)
          .bind_real(8, trial.median_ms)
          .bind_real(9, trial.spread)
          .bind_real(10, trial.gbps)
          .bind_int(11, now)
          .run();
    }
    // A tuned (or imported) winner answers the recorded problem; a heuristic stand-in does not.
    if (winner.origin != "heuristic")
      Statement(db, sql::kDeleteRecordedProblem, call)
          .bind_entry(winner.problem_key, winner.device_id, winner.template_hash)
          .run();
    if (stored_run) insert_tuning_run(db, *stored_run, call);
  });
}

bool Store::remove_result(const std::string& problem_key, const std::string& device_id,
                          const std::string& template_hash) {
  const Call call{"remove_result", problem_key, device_id};
  return impl_->write(call, [&](Database& db) {
    Statement(db, sql::kDeleteWinner, call).bind_entry(problem_key, device_id, template_hash).run();
    const bool removed = db.changes() > 0;
    Statement(db, sql::kDeleteTrials, call).bind_entry(problem_key, device_id, template_hash).run();
    return removed;
  });
}

void Store::put_binary(const Binary& binary) {
  const Call call{"put_binary", "", ""};
  impl_->write(call, [&](Database& db) { insert_binary(db, binary, call); });
}

void Store::put_binaries(const std::vector<Binary>& binaries) {
  const Call call{"put_binaries", "", ""};
  impl_->write(call, [&](Database& db) {
    for (const Binary& binary : binaries) keep_or_insert_binary(db, binary, call);
  });
}

int Store::remove_binaries(const std::vector<std::string>& hashes) {
  const Call call{"remove_binaries", "", ""};
  return impl_->write(call, [&](Database& db) {
    int removed = 0;
    for (const std::string& hash : hashes) {
      Statement(db, sql::kDeleteBinary, call).bind_text(1, hash).run();
      removed += db.changes();
    }
    return removed;
  });
}

bool Store::try_acquire_lease(const std::string& problem_key, const std::string& device_id,
                              const std::string& template_hash, const std::string& owner,
                              double ttl_seconds) {
  const Call call{"try_acquire_lease", problem_key, device_id};
  if (owner.empty() || !(ttl_seconds > 0) || !std::isfinite(ttl_seconds)) {
    throw Error(Error::Context{"cache", problem_key, "", device_id, ""},
                "try_acquire_lease: " +
                    (owner.empty() ? std::string("the owner is empty")
                                   : "ttl_seconds is " + std::to_string(ttl_seconds) +
                                         "; it must be a positive number of seconds"));
  }
  return impl_->write(call, [&](Database& db) {
    // Read the clock once the write lock is held: time spent waiting for it must not count.
    const double now = internal::unix_now_fractional();
    Statement(db, sql::kAcquireLease, call)
        .bind_entry(problem_key, device_id, template_hash)
        .bind_text(4, owner)
        .bind_real(5, now)
        .bind_real(6, now + ttl_seconds)
        .run();
    return db.changes() > 0;
  });
}

void Store::release_lease(const std::string& problem_key, const std::string& device_id,
                          const std::string& template_hash, const std::string& owner) {
  const Call call{"release_lease", problem_key, device_id};
  impl_->write(call, [&](Database& db) {
    Statement(db, sql::kReleaseLease, call)
        .bind_entry(problem_key, device_id, template_hash)
        .bind_text(4, owner)
        .run();
  });
}

void Store::record_problem(const std::string& op, const std::string& problem_key,
                           const std::string& device_id, const std::string& template_hash) {
  const Call call{"record_problem", problem_key, device_id};
  impl_->write(call, [&](Database& db) {
    Statement(db, sql::kRecordProblem, call)
        .bind_entry(problem_key, device_id, template_hash)
        .bind_text(4, op)
        .bind_int(5, unix_now())
        .run();
  });
}

bool Store::remove_recorded(const std::string& problem_key, const std::string& device_id,
                            const std::string& template_hash) {
  const Call call{"remove_recorded", problem_key, device_id};
  return impl_->write(call, [&](Database& db) {
    Statement(db, sql::kDeleteRecordedProblem, call).bind_entry(problem_key, device_id, template_hash).run();
    return db.changes() > 0;
  });
}

void Store::put_tuning_run(const TuningRun& run) {
  const Call call{"put_tuning_run", run.problem_key, run.device_id};
  impl_->write(call, [&](Database& db) { insert_tuning_run(db, run, call); });
}

}  // namespace kvtune::cache
