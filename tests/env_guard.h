#pragma once
// Sets (or unsets) an environment variable for a scope and restores what was there before: the
// tests run in one process, and a variable left behind changes the tests after them.

#include <cstdlib>
#include <optional>
#include <string>

namespace kvtune::test {

class EnvGuard {
 public:
  /// value nullptr: unset for the scope.
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = std::string(old);
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~EnvGuard() {
    if (saved_) ::setenv(name_.c_str(), saved_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

}  // namespace kvtune::test
