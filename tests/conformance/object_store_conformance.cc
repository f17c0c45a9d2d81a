#include "tests/conformance/object_store_conformance.h"

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "common/files.h"
#include "tests/support/random_bytes.h"

namespace sg::testing {
namespace {

std::string Body(const StatusOr<std::string>& r) {
  return r.ok() ? *r : "<" + r.status().ToString() + ">";
}

// What GetTo hands over, gathered; offsets must follow on.
std::string Streamed(ObjectStore& store, const std::string& key, ByteRange range) {
  std::string got;
  Status st = store.GetTo(key, range, [&](uint64_t at, std::string_view piece) {
    if (at != got.size()) return Status::IOError("piece at " + std::to_string(at));
    got.append(piece);
    return Status::Ok();
  });
  return st.ok() ? got : "<" + st.ToString() + ">";
}

}  // namespace

void ObjectStoreConformance::SetUp() {
  store_ = GetParam().make();
  ASSERT_NE(store_, nullptr);
  prefix_ = "conformance/" + RandomHex() + "/";
}

void ObjectStoreConformance::TearDown() {
  if (!store_) return;
  auto all = ListAll(*store_, prefix_);
  if (all.ok()) {
    for (const ObjectInfo& o : *all) (void)store_->Delete(o.key);
  }
}

TEST_P(ObjectStoreConformance, PutThenGetReturnsTheSameBytes) {
  const std::string data = RandomBytes(1 << 20, 1) + std::string("\0\0end", 5);
  ASSERT_TRUE(store_->Put(Key("blob"), data, PutCondition::None()).ok());
  auto got = store_->Get(Key("blob"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
}

TEST_P(ObjectStoreConformance, EmptyObjectRoundTrips) {
  ASSERT_TRUE(store_->Put(Key("empty"), "", PutCondition::None()).ok());
  EXPECT_EQ(Body(store_->Get(Key("empty"))), "");
  auto head = store_->Head(Key("empty"));
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, 0u);
}

TEST_P(ObjectStoreConformance, GetAndHeadOfMissingKeyAreNotFound) {
  EXPECT_TRUE(store_->Get(Key("missing")).status().Is(StatusCode::kNotFound));
  EXPECT_TRUE(store_->Head(Key("missing")).status().Is(StatusCode::kNotFound));
}

TEST_P(ObjectStoreConformance, HeadReportsSizeAndTheEtagPutReturned) {
  auto etag = store_->Put(Key("h"), "hello", PutCondition::None());
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  auto head = store_->Head(Key("h"));
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, 5u);
  EXPECT_EQ(head->etag, *etag);
  EXPECT_EQ(head->key, Key("h"));
}

TEST_P(ObjectStoreConformance, OverwriteReplacesContentAndEtag) {
  auto first = store_->Put(Key("o"), "one", PutCondition::None());
  auto second = store_->Put(Key("o"), "two", PutCondition::None());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(*first, *second);
  EXPECT_EQ(Body(store_->Get(Key("o"))), "two");
}

TEST_P(ObjectStoreConformance, CreateOnlySucceedsOnANewKey) {
  EXPECT_TRUE(store_->Put(Key("c"), "first", PutCondition::CreateOnly()).ok());
  EXPECT_EQ(Body(store_->Get(Key("c"))), "first");
}

TEST_P(ObjectStoreConformance, CreateOnlyOnAnExistingKeyFailsAndKeepsTheObject) {
  ASSERT_TRUE(store_->Put(Key("c"), "first", PutCondition::CreateOnly()).ok());
  auto again = store_->Put(Key("c"), "second", PutCondition::CreateOnly());
  EXPECT_TRUE(again.status().Is(StatusCode::kPreconditionFailed)) << again.status().ToString();
  EXPECT_EQ(Body(store_->Get(Key("c"))), "first");
}

TEST_P(ObjectStoreConformance, IfMatchWithTheCurrentEtagReplaces) {
  auto etag = store_->Put(Key("m"), "v1", PutCondition::None());
  ASSERT_TRUE(etag.ok());
  auto next = store_->Put(Key("m"), "v2", PutCondition::IfMatch(*etag));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_NE(*next, *etag);
  EXPECT_EQ(Body(store_->Get(Key("m"))), "v2");
}

TEST_P(ObjectStoreConformance, IfMatchWithAStaleEtagFailsAndKeepsTheObject) {
  auto stale = store_->Put(Key("m"), "v1", PutCondition::None());
  ASSERT_TRUE(stale.ok());
  ASSERT_TRUE(store_->Put(Key("m"), "v2", PutCondition::None()).ok());
  auto lost = store_->Put(Key("m"), "v3", PutCondition::IfMatch(*stale));
  EXPECT_TRUE(lost.status().Is(StatusCode::kPreconditionFailed)) << lost.status().ToString();
  EXPECT_EQ(Body(store_->Get(Key("m"))), "v2");
}

TEST_P(ObjectStoreConformance, IfMatchOnAMissingKeyFails) {
  auto r = store_->Put(Key("nothing"), "v", PutCondition::IfMatch("some-etag"));
  EXPECT_TRUE(r.status().Is(StatusCode::kPreconditionFailed)) << r.status().ToString();
  EXPECT_TRUE(store_->Get(Key("nothing")).status().Is(StatusCode::kNotFound));
}

TEST_P(ObjectStoreConformance, RacingCreateOnlyWritersHaveExactlyOneWinner) {
  constexpr int kWriters = 8;
  std::atomic<int> winners{0}, losers{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      auto r = store_->Put(Key("race"), "writer-" + std::to_string(i), PutCondition::CreateOnly());
      if (r.ok()) {
        ++winners;
      } else if (r.status().Is(StatusCode::kPreconditionFailed)) {
        ++losers;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
  EXPECT_EQ(losers.load(), kWriters - 1);
}

TEST_P(ObjectStoreConformance, RacingIfMatchWritersHaveExactlyOneWinner) {
  auto etag = store_->Put(Key("lease"), "gen-0", PutCondition::None());
  ASSERT_TRUE(etag.ok());
  constexpr int kWriters = 8;
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      if (store_->Put(Key("lease"), "gen-1-" + std::to_string(i), PutCondition::IfMatch(*etag))
              .ok()) {
        ++winners;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST_P(ObjectStoreConformance, RangedGetReturnsTheSlice) {
  ASSERT_TRUE(store_->Put(Key("r"), "0123456789", PutCondition::None()).ok());
  EXPECT_EQ(Body(store_->Get(Key("r"), ByteRange{2, 3})), "234");
  EXPECT_EQ(Body(store_->Get(Key("r"), ByteRange{7, std::nullopt})), "789");
  EXPECT_EQ(Body(store_->Get(Key("r"), ByteRange{0, 1})), "0");
}

TEST_P(ObjectStoreConformance, RangeRunningPastTheEndIsCut) {
  ASSERT_TRUE(store_->Put(Key("r"), "0123456789", PutCondition::None()).ok());
  EXPECT_EQ(Body(store_->Get(Key("r"), ByteRange{8, 100})), "89");
}

TEST_P(ObjectStoreConformance, RangeStartingAtTheEndIsOutOfRange) {
  ASSERT_TRUE(store_->Put(Key("r"), "0123456789", PutCondition::None()).ok());
  EXPECT_TRUE(store_->Get(Key("r"), ByteRange{10, 5}).status().Is(StatusCode::kOutOfRange));
}

// GetTo hands over what Get reads, with the same errors.
TEST_P(ObjectStoreConformance, AStreamedRangeIsTheSliceGetReads) {
  const std::string data = RandomBytes(3 << 20, 12);
  ASSERT_TRUE(store_->Put(Key("s"), data, PutCondition::None()).ok());
  EXPECT_TRUE(Streamed(*store_, Key("s"), ByteRange{1000, 2 << 20}) == data.substr(1000, 2 << 20));
  EXPECT_EQ(Streamed(*store_, Key("s"), ByteRange{(3 << 20) - 2, 100}), data.substr((3 << 20) - 2));
  ASSERT_TRUE(store_->Put(Key("e"), "", PutCondition::None()).ok());
  EXPECT_EQ(Streamed(*store_, Key("e"), ByteRange{0, 10}), "");
  Status past = store_->GetTo(Key("s"), ByteRange{3 << 20, 5},
                              [](uint64_t, std::string_view) { return Status::Ok(); });
  EXPECT_TRUE(past.Is(StatusCode::kOutOfRange)) << past.ToString();
  Status missing = store_->GetTo(Key("absent"), ByteRange{0, 5},
                                 [](uint64_t, std::string_view) { return Status::Ok(); });
  EXPECT_TRUE(missing.Is(StatusCode::kNotFound)) << missing.ToString();
  // The sink's error ends the read, with its code.
  Status refused = store_->GetTo(Key("s"), ByteRange{0, 1 << 20}, [](uint64_t, std::string_view) {
    return Status::Corruption("refused by the sink");
  });
  EXPECT_TRUE(refused.Is(StatusCode::kCorruption)) << refused.ToString();
}

TEST_P(ObjectStoreConformance, GetFillsInTheObjectInfo) {
  auto etag = store_->Put(Key("i"), "abcdef", PutCondition::None());
  ASSERT_TRUE(etag.ok());
  ObjectInfo info;
  ASSERT_TRUE(store_->Get(Key("i"), ByteRange{1, 2}, &info).ok());
  EXPECT_EQ(info.size, 6u);  // the whole object, not the range
  EXPECT_EQ(info.etag, *etag);
}

TEST_P(ObjectStoreConformance, ListReturnsKeysUnderThePrefixInByteOrder) {
  for (const char* k : {"b", "a/c", "a/b", "ab", "a-", "z/y/x"}) {
    ASSERT_TRUE(store_->Put(Key(k), k, PutCondition::None()).ok());
  }
  auto page = store_->List(Key("a"), "");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::vector<std::string> keys;
  for (const auto& o : page->objects) keys.push_back(o.key);
  EXPECT_EQ(keys, (std::vector<std::string>{Key("a-"), Key("a/b"), Key("a/c"), Key("ab")}));
  EXPECT_TRUE(page->next_token.empty());
  ASSERT_EQ(page->objects.size(), 4u);
  EXPECT_EQ(page->objects[1].size, 3u);
}

TEST_P(ObjectStoreConformance, ListPaginatesWithoutGapsOrRepeats) {
  std::set<std::string> expected;
  for (int i = 0; i < 7; ++i) {
    const std::string k = Key("p/" + std::to_string(i));
    ASSERT_TRUE(store_->Put(k, "x", PutCondition::None()).ok());
    expected.insert(k);
  }
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = store_->List(Key("p/"), token, 3);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->objects.size(), 3u);
    for (const auto& o : page->objects) seen.push_back(o.key);
    token = page->next_token;
    ASSERT_LT(++pages, 10) << "pagination does not end";
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(std::vector<std::string>(expected.begin(), expected.end()), seen);
}

TEST_P(ObjectStoreConformance, ListOfAnUnknownPrefixIsEmpty) {
  auto page = store_->List(Key("nothing/here/"), "");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->objects.empty());
  EXPECT_TRUE(page->next_token.empty());
}

TEST_P(ObjectStoreConformance, DeleteRemovesTheObject) {
  ASSERT_TRUE(store_->Put(Key("d/x"), "x", PutCondition::None()).ok());
  ASSERT_TRUE(store_->Delete(Key("d/x")).ok());
  EXPECT_TRUE(store_->Get(Key("d/x")).status().Is(StatusCode::kNotFound));
  auto page = store_->List(Key("d/"), "");
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->objects.empty());
  // A deleted key is free for a create-only write again.
  EXPECT_TRUE(store_->Put(Key("d/x"), "again", PutCondition::CreateOnly()).ok());
}

TEST_P(ObjectStoreConformance, DeleteOfAMissingKeySucceeds) {
  EXPECT_TRUE(store_->Delete(Key("never-existed")).ok());
}

TEST_P(ObjectStoreConformance, KeysWithSpacesAndUnicodeRoundTrip) {
  const std::string k = Key("dir with space/ü+=~%file (1).pt");
  ASSERT_TRUE(store_->Put(k, "payload", PutCondition::None()).ok());
  EXPECT_EQ(Body(store_->Get(k)), "payload");
  auto page = store_->List(Key("dir with space/"), "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, k);
}

TEST_P(ObjectStoreConformance, AWriterBuildsAnObjectFromManyAppends) {
  // 20 MiB in uneven pieces crosses S3's part size more than once.
  const std::string data = RandomBytes(20 << 20, 9);
  auto writer = store_->NewWriter(Key("written"));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  size_t offset = 0, piece = 1;
  while (offset < data.size()) {
    const size_t n = std::min(data.size() - offset, piece);
    ASSERT_TRUE((*writer)->Append(data.substr(offset, n)).ok());
    offset += n;
    piece = piece * 3 + 7;
  }
  EXPECT_TRUE(store_->Head(Key("written")).status().Is(StatusCode::kNotFound))
      << "nothing is visible before Commit";
  auto etag = (*writer)->Commit();
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  auto head = store_->Head(Key("written"));
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, data.size());
  EXPECT_EQ(head->etag, *etag);
  EXPECT_EQ(Body(store_->Get(Key("written"))), data);
}

TEST_P(ObjectStoreConformance, ASmallWrittenObjectRoundTrips) {
  auto writer = store_->NewWriter(Key("small-written"));
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append("hello ").ok());
  ASSERT_TRUE((*writer)->Append("world").ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  EXPECT_EQ(Body(store_->Get(Key("small-written"))), "hello world");
}

TEST_P(ObjectStoreConformance, AnAbortedWriterLeavesNothing) {
  {
    auto writer = store_->NewWriter(Key("abandoned"));
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(RandomBytes(9 << 20, 3)).ok());
    (*writer)->Abort();
  }
  {
    auto dropped = store_->NewWriter(Key("dropped"));
    ASSERT_TRUE(dropped.ok());
    ASSERT_TRUE((*dropped)->Append(RandomBytes(9 << 20, 4)).ok());
  }
  EXPECT_TRUE(store_->Head(Key("abandoned")).status().Is(StatusCode::kNotFound));
  EXPECT_TRUE(store_->Head(Key("dropped")).status().Is(StatusCode::kNotFound));
  auto stale = store_->CleanStaleWrites(prefix_, std::chrono::seconds(0), {});
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_EQ(*stale, 0) << "aborted writers left something to clean";
}

// A live writer's upload stays however old it is: gc spares the keys of the
// writers whose claims are live (docs/design.md §4, "Live writers").
TEST_P(ObjectStoreConformance, AWriteInProgressThatTheFilterSparesIsNotCleaned) {
  auto spared = store_->NewWriter(Key("spared"));
  auto stale = store_->NewWriter(Key("stale"));
  ASSERT_TRUE(spared.ok() && stale.ok());
  ASSERT_TRUE((*spared)->Append(RandomBytes(9 << 20, 6)).ok());
  ASSERT_TRUE((*stale)->Append(RandomBytes(9 << 20, 7)).ok());
  // Every write counts as stale (the cutoff is an hour ahead); only the
  // spared key is left.
  const std::string spared_key = Key("spared");
  auto cleaned =
      store_->CleanStaleWrites(prefix_, std::chrono::seconds(-3600),
                               [&](const std::string& key) { return key == spared_key; });
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  ASSERT_TRUE((*spared)->Append("tail").ok());
  ASSERT_TRUE((*spared)->Commit().ok());
  EXPECT_TRUE(store_->Head(spared_key).ok());
  // The memory store keeps an unfinished write in its writer: nothing to clean.
  if (store_->Describe().starts_with("memory://")) return;
  EXPECT_EQ(*cleaned, 1);
  EXPECT_FALSE((*stale)->Commit().ok()) << "its upload was cleaned";
}

TEST_P(ObjectStoreConformance, RecentWritesInProgressAreNotCleaned) {
  auto writer = store_->NewWriter(Key("in-progress"));
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append(RandomBytes(9 << 20, 5)).ok());
  auto cleaned = store_->CleanStaleWrites(prefix_, std::chrono::hours(1), {});
  ASSERT_TRUE(cleaned.ok());
  EXPECT_EQ(*cleaned, 0);
  ASSERT_TRUE((*writer)->Append("tail").ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  auto head = store_->Head(Key("in-progress"));
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, (9u << 20) + 4);
}

}  // namespace sg::testing
