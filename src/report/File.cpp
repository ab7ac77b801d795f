#include "shardproof/report/Report.h"
#include "shardproof/support/Error.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace shardproof::report {

// The rename is atomic on POSIX file systems, so a reader (or a failed run)
// sees either the old file or the complete new one, never half of it.
llvm::Error writeFileAtomically(const std::string &path, const std::string &text) {
  // Per process, so two runs writing the same file do not share a temporary.
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
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

llvm::Error checkWritable(const std::string &path) {
  if (path.empty())
    return llvm::Error::success();
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return userError("cannot write '" + path + "': it is a directory");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty())
    dir = ".";
  if (!fs::is_directory(dir, ec))
    return userError("cannot write '" + path + "': directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    return userError("cannot write '" + path + "': directory '" + dir.string() + "' is not writable (" +
                     std::strerror(errno) + ")");
  return llvm::Error::success();
}

} // namespace shardproof::report
