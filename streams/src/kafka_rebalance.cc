// KafkaSource's rebalances (the eager and the cooperative protocol): taking
// newly assigned partitions (the start_offset hook decides where each
// starts) and giving revoked ones up (on_revoke runs first; their messages
// fetched by the running Read are dropped). Served inside Read and Close, on
// the reader's thread (KafkaSource::Callbacks::Rebalance, kafka_source.cc).
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "kafka_message.h"
#include "rdkafka_api.h"
#include "tributary/kafka_source.h"

namespace tributary {
namespace {

using kafka_internal::NewList;
using kafka_internal::PartitionList;
using kafka_internal::PartitionName;
using kafka_internal::Rdk;

std::vector<KafkaPartition> ToPartitions(const rd_kafka_topic_partition_list_t* list) {
  std::vector<KafkaPartition> out;
  for (int i = 0; i < list->cnt; ++i) out.push_back({list->elems[i].topic, list->elems[i].partition});
  return out;
}

}  // namespace

void KafkaSource::OnRebalance(int err, rd_kafka_topic_partition_list_s* partitions) {
  const bool incremental = std::strcmp(Rdk().rd_kafka_rebalance_protocol(consumer_.get()), "COOPERATIVE") == 0;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    Assign(partitions, incremental);
  } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
    Revoke(partitions, incremental);
  } else {  // librdkafka's advice: give everything up, the group rebalances again
    if (pending_error_.ok()) {
      pending_error_ = Status::IOError(
          Where() + ": rebalance failed: " + Rdk().rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)));
    }
    Revoke(partitions, incremental);
  }
}

void KafkaSource::Assign(rd_kafka_topic_partition_list_s* partitions, bool incremental) {
  joined_ = true;
  PartitionList accepted = NewList(partitions->cnt);
  // The group's committed offsets, for the hook (one request for all).
  PartitionList committed = NewList(partitions->cnt);
  Status committed_error;
  if (options_.start_offset) {
    for (int i = 0; i < partitions->cnt; ++i) {
      Rdk().rd_kafka_topic_partition_list_add(committed.get(), partitions->elems[i].topic,
                                              partitions->elems[i].partition);
    }
    const rd_kafka_resp_err_t cerr =
        Rdk().rd_kafka_committed(consumer_.get(), committed.get(), static_cast<int>(options_.connect_timeout_ms));
    if (cerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
      committed_error =
          Status::IOError(std::string("cannot read the group's committed offsets: ") + Rdk().rd_kafka_err2str(cerr));
    }
  }
  for (int i = 0; i < partitions->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = partitions->elems[i];
    const std::string topic = tp.topic;
    int64_t offset = RD_KAFKA_OFFSET_INVALID;  // the committed offset, else auto.offset.reset
    if (options_.start_offset) {
      Status error = committed_error;
      std::optional<int64_t> group_offset;
      const rd_kafka_topic_partition_t& c = committed->elems[i];
      if (error.ok() && c.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        error =
            Status::IOError(std::string("cannot read the group's committed offset: ") + Rdk().rd_kafka_err2str(c.err));
      }
      if (c.offset >= 0) group_offset = c.offset;
      try {
        Result<std::optional<int64_t>> start = error.ok() ? options_.start_offset(topic, tp.partition, group_offset)
                                                          : Result<std::optional<int64_t>>(error);
        if (!start.ok()) {
          error = start.status();
        } else if (start->has_value()) {
          offset = **start;
          if (offset < 0) {
            error = Status::InvalidArgument("expected an offset >= 0, found " + std::to_string(offset));
          }
        }
      } catch (const std::exception& ex) {
        error = Status::Internal(std::string("the hook threw: ") + ex.what());
      } catch (...) {
        error = Status::Internal("the hook threw");
      }
      if (!error.ok()) {
        // Not assigned: starting anywhere else could skip or repeat messages.
        // Internal: the caller must Close and Connect again (Read's contract).
        if (pending_error_.ok()) {
          pending_error_ =
              Status::Internal(Where() + ": start_offset hook for " + PartitionName(topic, tp.partition) +
                               " (the partition is not read: Close and Connect again): " + error.ToString());
        }
        continue;
      }
    }
    Rdk().rd_kafka_topic_partition_list_add(accepted.get(), tp.topic, tp.partition)->offset = offset;
    assigned_.insert({topic, tp.partition});
  }
  rd_kafka_resp_err_t aerr = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (incremental) {
    if (rd_kafka_error_t* e = Rdk().rd_kafka_incremental_assign(consumer_.get(), accepted.get()); e != nullptr) {
      aerr = Rdk().rd_kafka_error_code(e);
      Rdk().rd_kafka_error_destroy(e);
    }
  } else {
    aerr = Rdk().rd_kafka_assign(consumer_.get(), accepted.get());
  }
  if (aerr != RD_KAFKA_RESP_ERR_NO_ERROR && pending_error_.ok()) {
    pending_error_ = Status::IOError(Where() + ": assign: " + Rdk().rd_kafka_err2str(aerr));
  }
}

void KafkaSource::Revoke(rd_kafka_topic_partition_list_s* partitions, bool incremental) {
  std::vector<KafkaPartition> revoked;
  for (const KafkaPartition& p : ToPartitions(partitions)) {
    if (assigned_.count(p) != 0) revoked.push_back(p);
  }
  if (options_.on_revoke && !revoked.empty()) {
    try {
      options_.on_revoke(revoked);
    } catch (const std::exception& ex) {
      if (pending_error_.ok()) pending_error_ = Status::Internal(Where() + ": on_revoke threw: " + ex.what());
    } catch (...) {
      if (pending_error_.ok()) pending_error_ = Status::Internal(Where() + ": on_revoke threw");
    }
  }
  // Messages of these partitions fetched by the running Read are dropped:
  // the caller's on_revoke did not see them, so they were not committed,
  // and the partitions' next owner reads them again.
  for (const KafkaPartition& p : revoked) assigned_.erase(p);
  if (reading_ != nullptr) {
    reading_->erase(std::remove_if(reading_->begin(), reading_->end(),
                                   [&](const KafkaEntry& e) {
                                     return assigned_.count({e.topic, e.partition}) == 0;
                                   }),
                    reading_->end());
  }
  if (incremental) {
    PartitionList list = NewList(static_cast<int>(revoked.size()));
    for (const KafkaPartition& p : revoked)
      Rdk().rd_kafka_topic_partition_list_add(list.get(), p.topic.c_str(), p.partition);
    if (rd_kafka_error_t* e = Rdk().rd_kafka_incremental_unassign(consumer_.get(), list.get()); e != nullptr) {
      Rdk().rd_kafka_error_destroy(e);  // only refuses partitions not assigned
    }
  } else {
    assigned_.clear();
    Rdk().rd_kafka_assign(consumer_.get(), nullptr);
  }
}

}  // namespace tributary
