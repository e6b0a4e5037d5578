// What a connection does with each request of the framed protobuf protocol
// (Connection::Handle: ping, stats, predict, snapshot, learn), on its
// strand; the answers go back through Fill and Complete (connection.cc).
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/connection.h"
#include "server/frame.h"

namespace tributary {

using server_internal::CountError;
using server_internal::FrameMessage;

v1::Response Connection::ErrorResponse(uint64_t id, v1::Response::Code code, const std::string& msg) {
  CountError(srv_->counters, code);
  v1::Response r;
  r.set_request_id(id);
  r.set_code(code);
  r.set_message(msg);
  return r;
}

void Connection::Handle(v1::Request req) {
  const uint64_t slot = NewSlot();
  const uint64_t id = req.request_id();
  auto start = Clock::now();
  uint32_t scopes = 0;
  const server_internal::RequestCheck check =
      server_internal::CheckRequest(req, srv_->opt.auth_token, &srv_->opt.scoped_tokens, &scopes);
  if (check == server_internal::RequestCheck::kUnauthenticated) {
    RefuseUnauthenticated(slot, id);
    return;
  }
  if (server_internal::AuthEnabled(srv_->opt.auth_token, &srv_->opt.scoped_tokens)) MarkAuthenticated();
  // A valid token without the scope a kind needs: refused, the connection
  // kept (it is no wrong guess).
  uint32_t need = 0;
  if (req.kind_case() == v1::Request::kLearn) need = kScopeLearn;
  if (req.kind_case() == v1::Request::kPredict) need = kScopePredict;
  if (req.kind_case() == v1::Request::kSnapshot) need = kScopeAdmin;
  if ((scopes & need) != need) {
    Fill(slot, FrameMessage(
                   ErrorResponse(id, v1::Response::PERMISSION_DENIED,
                                 "this token may " + ScopeNames(scopes) + "; this request needs " + ScopeNames(need))));
    return;
  }
  switch (req.kind_case()) {
    case v1::Request::kPing: {
      v1::Response r;
      r.set_request_id(id);
      r.mutable_pong();
      Fill(slot, FrameMessage(r));
      return;
    }
    case v1::Request::kStats: {
      v1::Response r;
      r.set_request_id(id);
      auto* s = r.mutable_stats();
      s->set_documents_learned(srv_->counters.documents_learned);
      s->set_predictions(srv_->counters.predictions);
      s->set_queue_depth(srv_->QueueDepth());
      s->set_wal_sequence(srv_->counters.documents_acknowledged);
      s->set_errors(srv_->counters.errors());
      s->set_learning_enabled(srv_->learning_enabled);
      // (The protocol port opens once recovery is done: a model is published.)
      Status read = srv_->Read([&](const LiveView& pub) {
        s->set_model_version(pub.version);
        s->set_family(pub.model->family().name);
        s->set_loss(pub.model->loss_plugin() ? pub.model->loss_plugin()->name : "");
        return Status::OK();
      });
      if (!read.ok()) {
        Fill(slot, FrameMessage(ErrorResponse(id, v1::Response::INTERNAL, read.ToString())));
        return;
      }
      Fill(slot, FrameMessage(r));
      return;
    }
    case v1::Request::kPredict: {
      Fill(slot, FrameMessage(Predict(id, req.predict(), start)));
      return;
    }
    case v1::Request::kSnapshot: {
      std::weak_ptr<Connection> weak = shared_from_this();
      std::unique_lock<std::mutex> l(srv_->learn_mu);
      if (srv_->stopping_learn) {
        // The learner has been told to stop: it would never answer.
        l.unlock();
        Fill(slot, FrameMessage(ErrorResponse(id, v1::Response::UNAVAILABLE, "server is shutting down")));
        return;
      }
      srv_->snapshot_waiters.push_back(
          [weak, slot, id, this_srv = srv_](const Status& st, const std::string& path, uint64_t seq) {
            auto c = weak.lock();
            if (!c) return;
            v1::Response r;
            r.set_request_id(id);
            if (st.ok()) {
              r.mutable_snapshot()->set_path(path);
              r.mutable_snapshot()->set_wal_sequence(seq);
            } else {
              CountError(this_srv->counters, v1::Response::INTERNAL);
              r.set_code(v1::Response::INTERNAL);
              r.set_message(st.ToString());
            }
            c->Complete(slot, std::move(r));
          });
      srv_->learn_cv.notify_one();
      return;
    }
    case v1::Request::kLearn: {
      Learn(slot, id, std::move(*req.mutable_learn()), start);
      return;
    }
    case v1::Request::KIND_NOT_SET:
      break;
  }
  Fill(slot, FrameMessage(ErrorResponse(id, v1::Response::INVALID_REQUEST, server_internal::kNoKindMessage)));
}

v1::Response Connection::Predict(uint64_t id, const v1::PredictRequest& pr, Clock::time_point start) {
  v1::Response r;
  r.set_request_id(id);
  auto* out = r.mutable_predict();
  const Model* model = nullptr;
  int bad = -1;
  uint64_t refused = 0;
  // Protobuf: per Prediction its tags, lengths and index (32 bytes), a
  // packed double 8 bytes, a string byte one.
  Status st = srv_->PredictDocuments(
      pr.documents(), Server::Impl::AnswerShape{32, 8, 1},
      [&](const Server::Impl::PredictedOutputs& o) {
        model = o.model;
        out->set_model_version(o.version);
        for (uint32_t k = 0; k < o.model->num_outputs(); ++k) out->add_class_names(o.model->OutputName(k));
      },
      [&](int i, const std::vector<double>& probs, uint32_t best) {
        auto* p = out->add_predictions();
        p->set_id(pr.documents(i).id());
        p->set_index(static_cast<uint64_t>(i));
        p->set_predicted(model->OutputName(best));
        for (double x : probs) p->add_probabilities(x);
      },
      [&](int i, const Status& why) {
        // Refused alone (empty, bad ids, ...): the others are answered.
        auto* p = out->add_predictions();
        p->set_id(pr.documents(i).id());
        p->set_index(static_cast<uint64_t>(i));
        p->set_error(why.message());
        ++refused;
      },
      &bad);
  if (!st.ok()) {
    return bad >= 0 || bad == Server::Impl::kAnswerTooLarge
               ? ErrorResponse(id, v1::Response::INVALID_REQUEST, "predict: " + st.message())
               : ErrorResponse(id, v1::Response::INTERNAL, st.ToString());
  }
  srv_->counters.predictions += static_cast<uint64_t>(pr.documents_size()) - refused;
  srv_->counters.predict_latency.Observe(std::chrono::duration<double>(Clock::now() - start).count());
  return r;
}

void Connection::Learn(uint64_t slot, uint64_t id, v1::LearnRequest lr, Clock::time_point start) {
  if (auto refusal = srv_->CheckLearn(lr)) {
    Fill(slot, FrameMessage(ErrorResponse(id, refusal->code, refusal->message)));
    return;
  }
  const uint64_t n = static_cast<uint64_t>(lr.documents_size());
  auto job = std::make_shared<LearnJob>();
  job->docs.assign(std::make_move_iterator(lr.mutable_documents()->begin()),
                   std::make_move_iterator(lr.mutable_documents()->end()));
  job->complete = [weak = weak_from_this(), slot, this_srv = srv_](v1::Response r) {
    // Errors are counted here, whether or not the client is still there.
    if (r.code() != v1::Response::OK) CountError(this_srv->counters, r.code());
    if (auto c = weak.lock()) c->Complete(slot, std::move(r));
  };
  job->request_id = id;
  job->start = start;
  Enqueue(job, n);
}

void Connection::Enqueue(std::shared_ptr<LearnJob> job, uint64_t n) {
  auto self = shared_from_this();
  auto retry = [self, job, n] { asio::post(self->strand_, [self, job, n] { self->Enqueue(job, n); }); };
  if (!srv_->TryReserve(n, retry)) {
    paused_ = true;  // backpressure: stop reading this connection
    return;
  }
  if (paused_) {
    paused_ = false;
    asio::post(strand_, [self] { self->ReadMore(); });
  }
  if (srv_->SubmitLearn(*job)) return;
  // The committer has drained and stopped (shutdown): this request, read
  // before the drain but admitted after it, would never be logged or
  // answered. Refuse it instead.
  srv_->ReleaseCapacity(n);
  v1::Response r;
  r.set_request_id(job->request_id);
  r.set_code(v1::Response::UNAVAILABLE);
  r.set_message("server is shutting down");
  job->complete(std::move(r));
}

}  // namespace tributary
