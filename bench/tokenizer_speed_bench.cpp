// polyhal's side of bench/tokenizer_speed.py: encodes every line of a text
// file (repeated) with a tokenizer.json or vocab.txt, one line at a time on
// one thread, then the same lines split over N threads sharing one
// tokenizer, and prints {"tokens", "one_thread_s", "batch_s"} as JSON.
//
//   polyhal_tokenizer_bench TOKENIZER CORPUS REPEATS THREADS
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: polyhal_tokenizer_bench TOKENIZER CORPUS REPEATS THREADS\n";
    return 2;
  }
  try {
    const auto tokenizer = polyhal::open_tokenizer({argv[1], {}});
    std::vector<std::string> lines;
    std::ifstream in(argv[2]);
    std::vector<std::string> one_copy;
    for (std::string line; std::getline(in, line);) one_copy.push_back(line);
    for (int r = 0; r < std::stoi(argv[3]); ++r)
      lines.insert(lines.end(), one_copy.begin(), one_copy.end());
    const auto seconds_since = [](auto start) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::size_t tokens = 0;
    auto start = std::chrono::steady_clock::now();
    for (const auto& line : lines)
      tokens += tokenizer->encode(line, std::nullopt, 0).input_ids.size();
    const double one = seconds_since(start);
    const auto threads = static_cast<std::size_t>(std::stoi(argv[4]));
    start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (std::size_t i = t; i < lines.size(); i += threads)
          (void)tokenizer->encode(lines[i], std::nullopt, 0);
      });
    for (auto& thread : pool) thread.join();
    const double batch = seconds_since(start);
    std::cout << "{\"tokens\": " << tokens << ", \"one_thread_s\": " << one
              << ", \"batch_s\": " << batch << "}\n";
    return 0;
  } catch (const polyhal::Error& e) {
    std::cerr << "polyhal_tokenizer_bench: " << e.what() << "\n";
    return 2;
  }
}
