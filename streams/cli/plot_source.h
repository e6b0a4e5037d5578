// The source of python/tributary/plot.py, compiled into the program:
// `prequential --plot` draws its curve with the same code as the Python
// package's tributary.plot.learning_curve, run by Debian's python3.
#ifndef TRIBUTARY_STREAMS_CLI_PLOT_SOURCE_H_
#define TRIBUTARY_STREAMS_CLI_PLOT_SOURCE_H_

#include <string>

#include "tributary/status.h"

namespace tributary::cli {

const char* PlotModuleSource();

// Draws the prequential result `json_text` (prequential --json's object) to
// `png` with plot.py's learning_curve, run by $TRIBUTARY_PYTHON or
// /usr/bin/python3. Errors name the picture and say what is missing
// (python3, matplotlib).
Status DrawLearningCurve(const std::string& json_text, const std::string& png, const std::string& title);

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_PLOT_SOURCE_H_
