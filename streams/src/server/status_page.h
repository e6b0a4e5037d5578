// The status page that GET / of the HTTP port serves (status_page.html,
// compiled in by streams/CMakeLists.txt; docs/http-api.md): one
// self-contained HTML document that polls GET /v1/status and draws it.
#ifndef TRIBUTARY_STREAMS_SRC_SERVER_STATUS_PAGE_H_
#define TRIBUTARY_STREAMS_SRC_SERVER_STATUS_PAGE_H_

#include <string_view>

namespace tributary::server_internal {

// The page (UTF-8 HTML, no external resources).
std::string_view StatusPageHtml();

}  // namespace tributary::server_internal

#endif  // TRIBUTARY_STREAMS_SRC_SERVER_STATUS_PAGE_H_
