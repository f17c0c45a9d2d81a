#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace sg {
namespace {

TEST(Status, FromErrnoMapsTheCommonErrorsAndKeepsTheContext) {
  EXPECT_TRUE(Status::FromErrno(ENOENT, "open a").Is(StatusCode::kNotFound));
  EXPECT_TRUE(Status::FromErrno(EEXIST, "x").Is(StatusCode::kAlreadyExists));
  EXPECT_TRUE(Status::FromErrno(ENOSPC, "x").Is(StatusCode::kNoSpace));
  EXPECT_TRUE(Status::FromErrno(EACCES, "x").Is(StatusCode::kPermissionDenied));
  EXPECT_TRUE(Status::FromErrno(EIO, "x").Is(StatusCode::kIOError));
  const Status s = Status::FromErrno(ENOENT, "open /data/ckpt/a.pt");
  EXPECT_EQ(s.message().rfind("open /data/ckpt/a.pt: ", 0), 0u) << s.message();
}

TEST(Status, ContextIsPrependedAndOkStaysOk) {
  EXPECT_EQ(Status::NotFound("no key").WithContext("restore").ToString(),
            "NotFound: restore: no key");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  SG_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Status, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_EQ(Quarter(5).status().message(), "odd");
}

}  // namespace
}  // namespace sg
