// How the SignedCallExecutor (common/aws_call.h) reads S3's answers to one
// call: which are retried, and the Status a failure becomes. Internal to
// common/s3_*.cc.
#pragma once

#include <string>

#include "common/aws_call.h"

namespace sg::s3_detail {

// The rules for `operation` ("PutObject") on `resource` ("bucket/key").
// `error_in_200`: an <Error> in a 2xx body is the failure it names, as
// CompleteMultipartUpload may answer.
AnswerRules S3Rules(std::string operation, std::string resource, bool error_in_200);

}  // namespace sg::s3_detail
