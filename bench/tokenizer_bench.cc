// Google Benchmark: throughput of the library tokenizer (lib/src/core/tokenizer.cc,
// docs/tokenizer.md), bytes of input per second (the "bytes_per_second"
// column, shown as MB/s or MiB/s by Google Benchmark):
//   BM_TokenizeAscii          English ASCII text (the ASCII lines of the
//                             fortunes corpus, or a synthetic text when the
//                             package is not installed), the common case
//   BM_TokenizeAsciiV1        the same text through the version 1 (ASCII-only)
//                             loop, kept here as the baseline the ASCII fast
//                             path must match
//   BM_TokenizeLatin          European text with accents (French, German,
//                             Spanish, Greek, Russian): most words leave the
//                             ASCII fast path
//   BM_TokenizeMixedUnicode   a multilingual mix: Latin with accents, Greek,
//                             Cyrillic, Arabic, Devanagari, Chinese, Japanese,
//                             Korean, Thai, full-width forms, emoji
// Each input is about 1 MiB, tokenized into a reused vector (its capacity is
// kept; the token strings are allocated, as in real use). Counter
// tokens_per_second: tokens produced per second.
// Benchmarks, not tests: nothing here is run by ctest.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/tokenizer.h"

namespace {

constexpr size_t kTargetBytes = 1 << 20;

// Version 1 of Tokenize (ASCII-only), verbatim: the baseline.
void TokenizeV1(std::string_view text, std::vector<std::string>* tokens) {
  std::string cur;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 'A' && c <= 'Z') {
      cur += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80) {
      cur += ch;
    } else if (!cur.empty()) {
      tokens->push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) tokens->push_back(std::move(cur));
}

std::string Repeat(const std::vector<std::string>& parts) {
  std::string out;
  while (out.size() < kTargetBytes) {
    for (const auto& p : parts) {
      out += p;
      out += '\n';
    }
  }
  return out;
}

// ASCII lines of the fortunes corpus (Debian package fortunes), else a
// synthetic English-like text.
const std::string& AsciiText() {
  static const std::string text = [] {
    std::vector<std::string> lines;
    const std::filesystem::path f = "/usr/share/games/fortunes/fortunes";
    std::ifstream in(f);
    std::string line;
    size_t bytes = 0;
    while (std::getline(in, line) && bytes < kTargetBytes) {
      bool ascii = true;
      for (unsigned char c : line) ascii &= c < 0x80;
      if (!ascii) continue;
      bytes += line.size() + 1;
      lines.push_back(line);
    }
    if (lines.size() < 100) {
      lines = {"The quick brown fox jumps over the lazy dog; it's 2024, and Don't STOP now.",
               "Q: What's the difference between a duck? A: One of its legs is both the same!",
               "Life is what happens (to you) while you're busy making other plans -- J. Lennon",
               "E-mail x@y.org, tab\tseparated\tfields, numbers 3.14159 and 42."};
    }
    return Repeat(lines);
  }();
  return text;
}

const std::string& LatinText() {
  static const std::string text = Repeat({
      "L'été dernier, nous sommes allés à la plage près de Nîmes ; c'était très agréable.",
      "Der Straßenverkehr in München ist während der Hauptverkehrszeit äußerst dicht.",
      "El niño comió una piña y bebió zumo de naranja en el café de la esquina.",
      "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο ΣΊΣΥΦΟΣ.",
      "Съешь же ещё этих мягких французских булок, да выпей чаю.",
  });
  return text;
}

const std::string& MixedText() {
  static const std::string text = Repeat({
      "Straße, naïve café — ÉCOLE ﬁne ＦＵＬＬ ｗｉｄｔｈ ２０２４ 😀👍🏽",
      "Η γρήγορη καφέ αλεπού · Съешь же ещё этих мягких булок",
      "مرحبا بالعالم ١٢٣٤ · नमस्ते दुनिया २०२४",
      "東京は日本の首都です。テキストを処理する。한국어 텍스트 처리",
      "ภาษาไทยไม่มีช่องว่างระหว่างคำ ❤️ emoji 🇫🇷 and ASCII "
      "words "
      "too.",
  });
  return text;
}

template <void (*Fn)(std::string_view, std::vector<std::string>*)>
void Run(benchmark::State& state, const std::string& text) {
  std::vector<std::string> tokens;
  size_t n_tokens = 0;
  for (auto _ : state) {
    tokens.clear();
    Fn(text, &tokens);
    n_tokens += tokens.size();
    benchmark::DoNotOptimize(tokens.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
  state.counters["tokens_per_second"] = benchmark::Counter(static_cast<double>(n_tokens), benchmark::Counter::kIsRate);
  state.counters["input_bytes"] = static_cast<double>(text.size());
}

void BM_TokenizeAscii(benchmark::State& state) { Run<tributary::Tokenize>(state, AsciiText()); }
void BM_TokenizeAsciiV1(benchmark::State& state) { Run<TokenizeV1>(state, AsciiText()); }
void BM_TokenizeLatin(benchmark::State& state) { Run<tributary::Tokenize>(state, LatinText()); }
void BM_TokenizeMixedUnicode(benchmark::State& state) { Run<tributary::Tokenize>(state, MixedText()); }

BENCHMARK(BM_TokenizeAscii)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TokenizeAsciiV1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TokenizeLatin)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TokenizeMixedUnicode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
