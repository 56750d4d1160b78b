#pragma once
/// @file config_keys.hpp
/// Declaring config keys, and what is made from the declarations: the
/// reader accepts exactly the declared keys (an unknown key is an error
/// naming the nearest), `polyhal config show` prints each with its value and
/// where it came from, and docs/config-reference.md is generated from them
/// (`polyhal config reference`; a test fails when the committed file
/// differs). Device options (`device.*`) belong to each backend: `polyhal
/// devices --options`.
///
/// A section's keys are declared with SectionKeys, one call per key:
///
///   SectionKeys<BatchSection> keys(section, [](RunConfig& c) -> auto& { return c.batch; });
///   keys.add("micro", &BatchSection::micro, "sequences per micro-batch");
///
/// reads `batch.micro` as a positive integer into the field, shows the
/// field's value and documents it, with the field's initial value as default.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config.hpp"
#include "polyhal/app/config_schema.hpp"

namespace polyhal {

/// How a key's value is read (and checked) from the config.
template <class T>
using ReadAs = std::function<T(const ConfigValue&)>;

/// An integer in [min, max].
ReadAs<std::int64_t> at_least(std::int64_t min, std::int64_t max = kMaxConfigInteger);
/// A repetition count (an int) of at least `min`.
ReadAs<int> repeats(std::int64_t min);
/// One of `choices`.
ReadAs<std::string> one_of(std::vector<std::string> choices);
/// A positive number of seconds, at most kMaxSeconds (a deadline from it never overflows).
ReadAs<double> seconds();

/// A value as YAML text, for `config show` and the reference.
std::string config_text(const std::filesystem::path& p);
std::string config_text(const std::string& s);
std::string config_text(bool b);
std::string config_text(double d);
std::string config_text(std::int64_t i);
std::string config_text(int i);
std::string config_text(std::uint64_t i);
std::string config_text(DType t);
std::string config_text(TriState t);

/// The reading of a field of type T when its key does not say otherwise:
/// integers >= 1 (seeds >= 0), numbers, true/false, dtypes, text, paths.
template <class T>
ReadAs<T> default_read() {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return at_least(1);
  } else if constexpr (std::is_same_v<T, int>) {
    return repeats(1);
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    return [](const ConfigValue& v) { return static_cast<std::uint64_t>(v.integer(0)); };
  } else if constexpr (std::is_same_v<T, bool>) {
    return [](const ConfigValue& v) { return v.boolean(); };
  } else if constexpr (std::is_same_v<T, double>) {
    return [](const ConfigValue& v) { return v.number(); };
  } else if constexpr (std::is_same_v<T, DType>) {
    return [](const ConfigValue& v) { return v.dtype(); };
  } else if constexpr (std::is_same_v<T, TriState>) {
    return [](const ConfigValue& v) { return v.tri_state(); };
  } else if constexpr (std::is_same_v<T, std::filesystem::path>) {
    return [](const ConfigValue& v) { return v.path(); };
  } else {
    static_assert(std::is_same_v<T, std::string>, "declare how this key is read");
    return [](const ConfigValue& v) { return v.text(); };
  }
}

/// A field's type, and its value type when it is an optional.
template <class T>
struct Unwrapped {
  using type = T;
  static constexpr bool optional = false;
};
template <class T>
struct Unwrapped<std::optional<T>> {
  using type = T;
  static constexpr bool optional = true;
};

/// What a key may add to its field, its help and its reading.
template <class S>
struct KeyExtras {
  std::vector<TaskTrait> traits{};   ///< empty: the declaration's
  std::vector<std::string> tasks{};  ///< a task folder's own section: its tasks
  OutputPath output = OutputPath::none;
  InputPath input = InputPath::none;
  /// The value shown, when the field alone does not say it (an unset optional).
  std::function<std::string(const S&)> value{};
};

/// Declares the keys of one section whose values live in struct S.
template <class S>
class SectionKeys {
 public:
  using Of = S& (*)(RunConfig&);
  /// `of` finds the struct in a config; `traits`: the tasks every key of
  /// this declaration applies to (empty: every task reading the section).
  SectionKeys(ConfigSection& section, Of of, std::vector<TaskTrait> traits = {})
      : section_(section), of_(of), traits_(std::move(traits)) {}

  /// A key whose value is field `field`; read by `read` (default_read<T>
  /// when empty). An optional field is read as its value type.
  template <class T>
  SectionKeys& add(const std::string& name, T S::*field, std::string help,
                   ReadAs<typename Unwrapped<T>::type> read = {}, KeyExtras<S> extras = {}) {
    using V = typename Unwrapped<T>::type;
    if (!read) read = default_read<V>();
    const Of of = of_;
    ConfigKey key{.path = section_.name + "." + name, .help = std::move(help)};
    key.traits = extras.traits.empty() ? traits_ : extras.traits;
    key.tasks = extras.tasks;
    key.output = extras.output;
    key.input = extras.input;
    key.read = [of, field, read](const ConfigValue& v, RunConfig& c) { of(c).*field = read(v); };
    if (extras.value) {
      key.value = [of, show = extras.value](const RunConfig& c) {
        return show(of(const_cast<RunConfig&>(c)));
      };
    } else {
      key.value = [of, field](const RunConfig& c) {
        // Reading the field only; `of` takes the config mutable for the readers.
        const T& value = of(const_cast<RunConfig&>(c)).*field;
        if constexpr (Unwrapped<T>::optional) {
          return value ? config_text(*value) : std::string();
        } else {
          return config_text(value);
        }
      };
    }
    section_.keys.push_back(std::move(key));
    return *this;
  }

  /// A key read and shown by hand (lists, enums, keys that set several fields).
  SectionKeys& custom(const std::string& name, std::string help,
                      std::function<void(const ConfigValue&, S&)> read,
                      std::function<std::string(const S&)> value, KeyExtras<S> extras = {}) {
    const Of of = of_;
    ConfigKey key{.path = section_.name + "." + name, .help = std::move(help)};
    key.traits = extras.traits.empty() ? traits_ : extras.traits;
    key.tasks = extras.tasks;
    key.output = extras.output;
    key.input = extras.input;
    key.read = [of, read = std::move(read)](const ConfigValue& v, RunConfig& c) { read(v, of(c)); };
    key.value = [of, value = std::move(value)](const RunConfig& c) {
      return value(of(const_cast<RunConfig&>(c)));
    };
    section_.keys.push_back(std::move(key));
    return *this;
  }

 private:
  ConfigSection& section_;
  Of of_;
  std::vector<TaskTrait> traits_;
};

/// A task's own section S (S::kSection names it, RunConfig::section<S>()
/// finds it): the section, with its defaults added to every config of a
/// task that reads it.
template <class S>
ConfigSection task_section() {
  ConfigSection section{.name = S::kSection};
  section.add_defaults = [](RunConfig& c) { c.task_sections[S::kSection] = S{}; };
  return section;
}
/// Finds a task's own section S in a config, for SectionKeys.
template <class S>
S& task_section_of(RunConfig& config) {
  return config.section<S>();
}

/// Every key `tasks` may read: the common sections', then each task's own
/// (a section shared by several tasks once), in the reference's order.
std::vector<const ConfigKey*> config_keys(const std::vector<TaskSchema>& tasks);
/// Every key the task of `schema` reads, in the reference's order.
std::vector<const ConfigKey*> task_keys(const TaskSchema& schema);
/// Whether `key` applies to the task of `schema`.
bool key_applies(const ConfigKey& key, const TaskSchema& schema);
/// docs/config-reference.md for `tasks`.
std::string config_reference_markdown(const std::vector<TaskSchema>& tasks);
/// The resolved config: every key that applies to the config's task, with
/// its value and where the value came from (file:line, --set, or default).
/// With the backend's `device_options`, every device option too (given or
/// the backend's default), checked as `run` checks it: a ConfigError naming
/// file:line for an unknown option or a bad value. Without them, the
/// device.* values the config gives, unchecked.
std::string config_show_text(const RunConfig& config,
                             const std::vector<OptionSpec>* device_options = nullptr);

}  // namespace polyhal
