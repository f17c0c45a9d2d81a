#include "common/object_store.h"

#include "common/spare_buffer.h"

namespace sg {

Status ObjectStore::GetTo(const std::string& key, ByteRange range, const BodySink& sink) {
  SG_ASSIGN_OR_RETURN(std::string bytes, Get(key, range));
  Status st = bytes.empty() ? Status::Ok() : sink(0, bytes);
  RecycleResponseBody(std::move(bytes));  // the thread's next large read reuses its memory
  return st;
}

StatusOr<std::vector<ObjectInfo>> ListAll(ObjectStore& store, const std::string& prefix) {
  std::vector<ObjectInfo> all;
  std::string token;
  do {
    SG_ASSIGN_OR_RETURN(ListPage page, store.List(prefix, token));
    all.insert(all.end(), std::make_move_iterator(page.objects.begin()),
               std::make_move_iterator(page.objects.end()));
    token = std::move(page.next_token);
  } while (!token.empty());
  return all;
}

}  // namespace sg
