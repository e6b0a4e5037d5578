#include "tributary/version.h"

#ifndef TRIBUTARY_VERSION_STRING
#error "TRIBUTARY_VERSION_STRING must be defined by the build (lib/CMakeLists.txt)"
#endif

namespace tributary {

const char* Version() { return TRIBUTARY_VERSION_STRING; }

}  // namespace tributary
