// A body received in pieces: what the HTTP transport (common/http.h) and the
// object stores' streaming reads (common/object_store.h) hand their bytes to.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "common/status.h"

namespace sg {

// Receives a body as it arrives: each piece with its offset in the body, in
// order. Offset 0 after earlier pieces means the body is being sent again
// from its start (a retried request): what was made of the earlier pieces
// is to be dropped. An error it returns ends the transfer. While it waits
// for bytes, a transport may also call it with none (about once a second;
// never meaning a start over), so that its error can end a transfer that
// stalls: a sink that is told to give up says so there too.
using BodySink = std::function<Status(uint64_t offset, std::string_view bytes)>;

}  // namespace sg
