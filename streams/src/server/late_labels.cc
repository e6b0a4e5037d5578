// Late labels, the server's side (issue 42; feedback.h holds the store):
// the store opened at recovery, and the delayed quality figures.
#include "server/server_impl.h"  // first: it configures Asio for TSan builds

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <vector>

namespace tributary {

Status Server::Impl::OpenFeedback() {
  FeedbackStore::Options fo;
  fo.max_bytes = opt.feedback_max_bytes;
  fo.max_age_s = opt.feedback_max_age_s;
  fo.on_corruption = opt.on_corruption;
  fo.env = env;
  auto store =
      FeedbackStore::Open((std::filesystem::path(data_dir->path()) / "feedback").string(), fo,
                          [this](const v1::KeptPrediction& p, const std::string& label) { CountDelayed(p, label); });
  if (!store.ok()) return store.status();
  feedback = std::move(store).value();
  return Status::OK();
}

void Server::Impl::CountDelayed(const v1::KeptPrediction& p, const std::string& label) {
  // The class the label names, in the order the probabilities were given
  // (classes are only ever added at the end; a class new since then is an
  // index past them, which QualityMonitor counts as a miss).
  int64_t y = -1;
  (void)live->WithModel([&](Model* m) {
    if (!m->latent_outputs()) y = m->schema().ClassIndex(label);
    return Status::OK();
  });
  if (y < 0 || p.probabilities_size() == 0) return;
  std::vector<double> scores(static_cast<size_t>(p.probabilities_size()));
  for (int k = 0; k < p.probabilities_size(); ++k) {
    scores[static_cast<size_t>(k)] = std::log(std::max(p.probabilities(k), 1e-300));  // log p(k | x): a score
  }
  std::lock_guard<std::mutex> l(quality_mu);
  delayed.Add(scores.data(), static_cast<uint32_t>(scores.size()), static_cast<uint32_t>(y));
}

}  // namespace tributary
