#include "common/object_store.h"

namespace sg {

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
