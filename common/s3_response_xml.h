// What the S3 response parsers share with the client. The parsers themselves
// are declared in common/s3_client.h. Internal to common/s3_*.cc.
#pragma once

#include <string>

namespace sg::s3_detail {

// An ETag without its surrounding quotes.
std::string Unquote(std::string s);

}  // namespace sg::s3_detail
