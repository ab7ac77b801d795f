#include "shardproof/report/Report.h"
#include "shardproof/support/Error.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace shardproof::report {

// The rename is atomic on POSIX file systems, so a reader (or a failed run)
// sees either the old file or the complete new one, never half of it.
llvm::Error writeFileAtomically(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      return userError("cannot write '" + path + "': " + std::strerror(errno));
    if (!(f << text) || !f.flush()) {
      f.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return userError("cannot write '" + path + "': write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return userError("cannot write '" + path + "': " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace shardproof::report
