#include "commands/commands.h"

namespace tributary::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"convert", "convert tsv or svmlight text to a document stream", SetUpConvert},
      {"train", "learn a model from a stream (sdEM, or SEP / EP / ADF with --engine)", SetUpTrain},
      {"eval", "evaluate a model on a labelled stream", SetUpEval},
      {"predict", "predicted class and probabilities per document", SetUpPredict},
      {"infer", "topic / component proportions per document (latent families)", SetUpInfer},
      {"topics", "each topic's (component's) most probable terms", SetUpTopics},
      {"prequential", "test-then-train over one pass: accuracy, log-loss (NCLL) and hinge, cumulative and per window",
       SetUpPrequential},
      {"plugins", "list the plugins found and the files refused", SetUpPlugins},
      {"plugin-check",
       "conformance checks of a family or loss plugin file (rho = 0, caches, snapshots, losses, threads)",
       SetUpPluginCheck},
      {"inspect", "summary of a model snapshot (family, classes, learner state, digest)", SetUpInspect},
      {"serve", "a long-running server that learns and predicts concurrently", SetUpServe},
      {"client", "talk to a running server: learn, predict, stats, snapshot, ping", SetUpClient},
  };
  return kCommands;
}

}  // namespace tributary::cli
