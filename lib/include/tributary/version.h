// The library's version: CMake's project(VERSION), the one place it is
// written. Recorded in snapshots ("created_by") and printed by --version.
#ifndef TRIBUTARY_VERSION_H_
#define TRIBUTARY_VERSION_H_

namespace tributary {

/// "0.1.0": major.minor.patch of this build.
const char* Version();

}  // namespace tributary

#endif  // TRIBUTARY_VERSION_H_
