// The library tokenizer (lib/src/core/tokenizer.cc, docs/tokenizer.md): ASCII text
// tokenizes as in version 1, the Unicode rules of version 2, and the
// invariants on any input: every token is non-empty, valid UTF-8, in
// NFKC_Casefold, and tokenizes to itself.
#include "tributary/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Tok(std::string_view text) {
  std::vector<std::string> t;
  Tokenize(text, &t);
  return t;
}

// Version 1 (the ASCII tokenizer), verbatim: the reference for ASCII input.
std::vector<std::string> TokenizeV1(std::string_view text) {
  std::vector<std::string> tokens;
  std::string cur;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 'A' && c <= 'Z') {
      cur += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80) {
      cur += ch;
    } else if (!cur.empty()) {
      tokens.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) tokens.push_back(std::move(cur));
  return tokens;
}

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (len <= 0) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

// NFKC_Casefold of s with utf8proc's whole-string API (the reference).
std::string NfkcCasefold(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                                  UTF8PROC_CASEFOLD | UTF8PROC_IGNORE));
  std::string r = n < 0 ? "<error>" : std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string Encode(int32_t cp) {
  utf8proc_uint8_t b[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(cp, b);
  return std::string(reinterpret_cast<const char*>(b), static_cast<size_t>(n));
}

std::string Hex(std::string_view s) {
  std::ostringstream o;
  for (unsigned char c : s) o << std::hex << static_cast<int>(c) << ' ';
  return o.str();
}

// The invariants of every token: non-empty, valid UTF-8, normalised, and a
// fixed point of Tokenize. Returns the number of violations (each reported).
int CheckTokens(std::string_view input, const std::vector<std::string>& tokens) {
  int bad = 0;
  for (const auto& t : tokens) {
    if (t.empty()) {
      ADD_FAILURE() << "empty token from input bytes " << Hex(input);
      ++bad;
      continue;
    }
    if (!IsValidUtf8(t)) {
      ADD_FAILURE() << "invalid UTF-8 token " << Hex(t) << " from input bytes " << Hex(input);
      ++bad;
      continue;
    }
    if (NfkcCasefold(t) != t) {
      ADD_FAILURE() << "token " << t << " (" << Hex(t) << ") is not NFKC_Casefold; input bytes " << Hex(input);
      ++bad;
    }
    const auto again = Tok(t);
    if (again != std::vector<std::string>{t}) {
      ADD_FAILURE() << "token " << t << " (" << Hex(t) << ") tokenizes to " << again.size() << " tokens; input bytes "
                    << Hex(input);
      ++bad;
    }
  }
  return bad;
}

TEST(TokenizerTest, Version) {
  EXPECT_EQ(kTokenizerVersion, 2);
  EXPECT_STRNE(TokenizerUnicodeVersion(), "");
}

// ---- ASCII: exactly version 1 ----------------------------------------------

TEST(TokenizerTest, AsciiAsVersion1) {
  EXPECT_THAT(Tok("Don't STOP"), ElementsAre("don", "t", "stop"));
  EXPECT_THAT(Tok("Hello, World! It's 2024..."), ElementsAre("hello", "world", "it", "s", "2024"));
  EXPECT_THAT(Tok("A-B_c d2e  F9"), ElementsAre("a", "b", "c", "d2e", "f9"));
  EXPECT_THAT(Tok(""), IsEmpty());
  EXPECT_THAT(Tok(" \t\n.,;"), IsEmpty());
}

TEST(TokenizerTest, RandomAsciiMatchesVersion1) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> kind(0, 9), len(0, 120), any(0, 127), letter(0, 25), digit(0, 9);
  for (int iter = 0; iter < 500; ++iter) {
    std::string s;
    const int n = len(rng);
    for (int k = 0; k < n; ++k) {
      const int what = kind(rng);  // letters and digits dominate, so that words are long enough to matter
      if (what < 3) {
        s += static_cast<char>('a' + letter(rng));
      } else if (what < 5) {
        s += static_cast<char>('A' + letter(rng));
      } else if (what < 6) {
        s += static_cast<char>('0' + digit(rng));
      } else {
        s += static_cast<char>(any(rng));  // includes NUL, controls, punctuation, space
      }
    }
    ASSERT_EQ(Tok(s), TokenizeV1(s)) << "input bytes " << Hex(s);
  }
}

TEST(TokenizerTest, NulBytesSeparate) {
  EXPECT_THAT(Tok(std::string_view("ab\0cd\0\0", 7)), ElementsAre("ab", "cd"));
  EXPECT_THAT(Tok(std::string_view("\0", 1)), IsEmpty());
  EXPECT_THAT(Tok(std::string_view("caf\xc3\xa9\0x", 7)), ElementsAre("café", "x"));
}

TEST(TokenizerTest, AppendsToExistingTokens) {
  std::vector<std::string> t{"x"};
  Tokenize("y Ÿ", &t);
  EXPECT_THAT(t, ElementsAre("x", "y", "ÿ"));
}

// ---- Normalisation: NFKC_Casefold ------------------------------------------

TEST(TokenizerTest, CaseFoldingAndCompatibility) {
  EXPECT_THAT(Tok("Straße STRASSE"), ElementsAre("strasse", "strasse"));
  EXPECT_THAT(Tok("ＡＢＣ ｄｅｆ １２３"), ElementsAre("abc", "def", "123"));  // full width
  EXPECT_THAT(Tok("ﬁne ﬃ"), ElementsAre("fine", "ffi"));                       // ligatures
  EXPECT_THAT(Tok("ΣΊΣΥΦΟΣ σίσυφος"), ElementsAre("σίσυφοσ", "σίσυφοσ"));      // final sigma folds to σ
  EXPECT_THAT(Tok("ÉCOLE École"), ElementsAre("école", "école"));
  EXPECT_THAT(Tok("Ⅻ ① ™"), ElementsAre("xii", "1", "tm"));  // compatibility forms become letters/digits
  EXPECT_THAT(Tok("½"), ElementsAre("1", "2"));              // 1⁄2: the fraction slash separates
  EXPECT_THAT(Tok("ǅungla"), ElementsAre("džungla"));        // title case
}

TEST(TokenizerTest, ComposedForm) {
  const std::string composed = "\xc3\xa9";               // U+00E9
  EXPECT_THAT(Tok("e\xcc\x81"), ElementsAre(composed));  // e + U+0301
  EXPECT_THAT(Tok("E\xcc\x81"), ElementsAre(composed));  // E + U+0301
  EXPECT_THAT(Tok("caf"
                  "e\xcc\x81s"),
              ElementsAre("cafés"));  // ASCII on both sides
  EXPECT_THAT(Tok("\xc3\xa9"), ElementsAre(composed));
  // Canonical order: the two orders of the same marks are one token.
  EXPECT_EQ(Tok("a\u0323\u0301"), Tok("a\u0301\u0323"));
  EXPECT_THAT(Tok("a\u0323\u0301"), ElementsAre("\u1ea1\u0301"));
  EXPECT_THAT(Tok("\u1112\u1161\u11ab"), ElementsAre("\ud55c"));  // Hangul jamo -> syllable
  EXPECT_THAT(Tok("\u304b\u3099"), ElementsAre("\u304c"));        // か + voicing mark -> が
}

TEST(TokenizerTest, DefaultIgnorablesAreRemoved) {
  EXPECT_THAT(Tok("co\u00adoperate"), ElementsAre("cooperate"));  // soft hyphen
  EXPECT_THAT(Tok("ab\u200dcd\u2060ef"), ElementsAre("abcdef"));  // ZWJ, word joiner
  EXPECT_THAT(Tok("\ufeffhello"), ElementsAre("hello"));          // byte order mark
}

// ---- Word boundaries -------------------------------------------------------

TEST(TokenizerTest, PunctuationSymbolsAndSpacesSeparate) {
  EXPECT_THAT(Tok("don\u2019t stop"), ElementsAre("don", "t", "stop"));  // typographic apostrophe
  EXPECT_THAT(Tok("«bonjour»—adieu…"), ElementsAre("bonjour", "adieu"));
  EXPECT_THAT(Tok("a\u00a0b\u3000c\u2028d"), ElementsAre("a", "b", "c", "d"));  // NBSP, ideographic space, LS
  EXPECT_THAT(Tok("5€ 3°C x²"), ElementsAre("5", "3", "c", "x2"));
  EXPECT_THAT(Tok("\u0301abc"), ElementsAre("abc"));  // a mark with nothing before it is dropped
  EXPECT_THAT(Tok("x \u0301"), ElementsAre("x"));
}

TEST(TokenizerTest, EmojiSeparate) {
  EXPECT_THAT(Tok("I \u2764\ufe0f NY\U0001F600!"), ElementsAre("i", "ny"));
  EXPECT_THAT(Tok("\U0001F44D\U0001F3FDok\U0001F468\u200d\U0001F469\u200d\U0001F467"), ElementsAre("ok"));
  EXPECT_THAT(Tok("\U0001F600"), IsEmpty());
  EXPECT_THAT(Tok("\U0001F1EB\U0001F1F7"), IsEmpty());  // a flag (regional indicators)
}

TEST(TokenizerTest, NumbersOfOtherScripts) {
  EXPECT_THAT(Tok("\u0661\u0662\u0663"), ElementsAre("\u0661\u0662\u0663"));  // Arabic-Indic digits: one number
  EXPECT_THAT(Tok("سلام ١٢٣!"), ElementsAre("سلام", "١٢٣"));
  EXPECT_THAT(Tok("۱۴۰۲"), ElementsAre("۱۴۰۲"));  // Extended Arabic-Indic
  EXPECT_THAT(Tok("२०२४"), ElementsAre("२०२४"));  // Devanagari
  EXPECT_THAT(Tok("๒๕๖๗"), ElementsAre("๒๕๖๗"));  // Thai digits stay one number
}

TEST(TokenizerTest, ScriptsWithSpacesKeepWords) {
  EXPECT_THAT(Tok("नमस्ते दुनिया"), ElementsAre("नमस्ते", "दुनिया"));  // virama and vowel signs inside
  EXPECT_THAT(Tok("Привет, МИР"), ElementsAre("привет", "мир"));
  EXPECT_THAT(Tok("한국어 텍스트"), ElementsAre("한국어", "텍스트"));  // Hangul is written with spaces
  EXPECT_THAT(Tok("שלום עולם"), ElementsAre("שלום", "עולם"));
}

TEST(TokenizerTest, ScriptsWithoutSpacesAreCharacters) {
  EXPECT_THAT(Tok("日本語"), ElementsAre("日", "本", "語"));
  EXPECT_THAT(Tok("东京2024年"), ElementsAre("东", "京", "2024", "年"));
  EXPECT_THAT(Tok("ひらがな"), ElementsAre("ひ", "ら", "が", "な"));
  // A Katakana run is one word (UAX #29 WB13), half width folded to full width.
  EXPECT_THAT(Tok("テキストです ﾃｽﾄ"), ElementsAre("テキスト", "で", "す", "テスト"));
  EXPECT_THAT(Tok("Tシャツ"), ElementsAre("t", "シャツ"));
  EXPECT_THAT(Tok("㍿"), ElementsAre("株", "式", "会", "社"));  // a compatibility square: its ideographs
  // Thai: each letter with its marks (สวัสดี).
  EXPECT_THAT(Tok("\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35"),
              ElementsAre("\u0e2a", "\u0e27\u0e31", "\u0e2a", "\u0e14\u0e35"));
  // Khmer: COENG stacks the next consonant into the same cluster (ខ្មែរ).
  EXPECT_THAT(Tok("\u1781\u17d2\u1798\u17c2\u179a"), ElementsAre("\u1781\u17d2\u1798\u17c2", "\u179a"));
  EXPECT_THAT(Tok("ລາວ"), ElementsAre("ລ", "າ", "ວ"));
  EXPECT_THAT(Tok("\u1019\u103c\u1014\u103a"), ElementsAre("\u1019\u103c", "\u1014\u103a"));  // Myanmar
  // Regression: a stacking virama that canonical ordering moves before other
  // marks still joins the next letter, so that the token tokenizes to itself.
  const std::string moved = "\u65e5\u0344\u1039\u65e5";
  EXPECT_EQ(Tok(moved).size(), 1u);
  EXPECT_EQ(CheckTokens(moved, Tok(moved)), 0);
}

// ---- Invalid UTF-8 ---------------------------------------------------------

TEST(TokenizerTest, InvalidUtf8Separates) {
  struct Case {
    std::string_view bytes;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"ab\x80"
       "cd",
       {"ab", "cd"}},  // lone continuation byte
      {"\xbf\xbf"
       "ab",
       {"ab"}},            // several
      {"ab\xc3", {"ab"}},  // truncated 2-byte sequence at the end
      {"ab\xe2\x82"
       "cd",
       {"ab", "cd"}},  // truncated 3-byte sequence
      {"ab\xf0\x9f\x98"
       "cd",
       {"ab", "cd"}},  // truncated 4-byte sequence
      {"ab\xc0\xaf"
       "cd",
       {"ab", "cd"}},  // overlong '/'
      {"ab\xc1\x81"
       "cd",
       {"ab", "cd"}},  // overlong 'A': not a letter
      {"ab\xe0\x80\xaf"
       "cd",
       {"ab", "cd"}},  // overlong, 3 bytes
      {"ab\xf0\x80\x80\xaf"
       "cd",
       {"ab", "cd"}},  // overlong, 4 bytes
      {"ab\xed\xa0\x80"
       "cd",
       {"ab", "cd"}},  // high surrogate U+D800
      {"ab\xed\xbf\xbf"
       "cd",
       {"ab", "cd"}},  // low surrogate U+DFFF
      {"ab\xed\xa0\xbd\xed\xb8\x80"
       "cd",
       {"ab", "cd"}},  // CESU-8 surrogate pair
      {"ab\xf4\x90\x80\x80"
       "cd",
       {"ab", "cd"}},  // > U+10FFFF
      {"ab\xf8\x88\x80\x80\x80"
       "cd",
       {"ab", "cd"}},  // 5-byte form
      {"ab\xfe\xff"
       "cd",
       {"ab", "cd"}},
      {"caf\xc3\xa9\xff"
       "s",
       {"café", "s"}},          // after a non-ASCII word
      {"\xc3\xa9\xcc", {"é"}},  // truncated combining mark
  };
  for (const auto& c : cases) {
    const auto got = Tok(c.bytes);
    EXPECT_EQ(got, c.want) << "input bytes " << Hex(c.bytes);
    EXPECT_EQ(CheckTokens(c.bytes, got), 0);
  }
}

TEST(TokenizerTest, RandomBytesGiveValidTokens) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 64);
  int bad = 0;
  for (int iter = 0; iter < 5000 && bad == 0; ++iter) {
    std::string s;
    const int n = len(rng);
    for (int k = 0; k < n; ++k) s += static_cast<char>(byte(rng));
    bad += CheckTokens(s, Tok(s));
  }
  EXPECT_EQ(bad, 0);
}

// Pieces that interact at their seams: words, marks, ignorables, separators,
// scripts with and without spaces, invalid bytes.
TEST(TokenizerTest, RandomMixedTextGivesValidTokens) {
  // clang-format off
  const std::vector<std::string> pieces = {
      "a", "Z", "7", " ", "'", "-", "é", "e\u0301", "\u0301", "\u0323", "\u00ad", "\u200d", "ß", "ﬁ", "Σ", "ς",
      "日", "の", "テ", "\u30fc", "ｶ", "\uff9e", "\u3099", "ส", "\u0e31", "\u17d2", "ក", "\u1039", "က", "한",
      "\u1112", "\u1161", "\u11ab", "١", "½", "™", "\U0001F600", "\U0001F3FD", "\xff", "\xc3", "\xe2\x82",
      "\xed\xa0\x80", "İ", "\u0345", "ΐ", "ǅ", "\u2126", "K", "\u212a", "㍿", "\u0f73", "\u0344", "\u1e9e",
      std::string("\0", 1)};
  // clang-format on
  std::mt19937 rng(11);
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1);
  std::uniform_int_distribution<int> len(0, 12);
  int bad = 0;
  for (int iter = 0; iter < 20000 && bad == 0; ++iter) {
    std::string s;
    const int n = len(rng);
    for (int k = 0; k < n; ++k) s += pieces[pick(rng)];
    bad += CheckTokens(s, Tok(s));
  }
  EXPECT_EQ(bad, 0);
}

// ---- Invariants over all of Unicode and over real text ---------------------

// Every code point alone, after an ASCII letter, after a Hebrew letter and
// before a combining mark: each token is valid, normalised and a fixed point.
TEST(TokenizerTest, EveryCodePointGivesFixedPointTokens) {
  int bad = 0;
  for (int32_t cp = 0; cp <= 0x10FFFF && bad < 10; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string c = Encode(cp);
    for (const std::string& s : {c, "a" + c, c + "\u0301", "\u05d0" + c}) bad += CheckTokens(s, Tok(s));
  }
  EXPECT_EQ(bad, 0);
}

TEST(TokenizerTest, FortunesGiveValidTokens) {
  const std::filesystem::path dir = "/usr/share/games/fortunes";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " missing (Debian package fortunes)";
  size_t files = 0, lines = 0, tokens = 0;
  int bad = 0;
  // The *.u8 symlinks are followed (their text is read twice: harmless); the
  // binary *.dat indexes are read as text too: any bytes must give valid tokens.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    ASSERT_TRUE(in) << entry.path();
    ++files;
    std::string line;
    while (std::getline(in, line) && bad < 10) {
      ++lines;
      const auto t = Tok(line);
      tokens += t.size();
      bad += CheckTokens(line, t);
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(files, 10u);
  EXPECT_GT(tokens, 100000u);
  std::cout << files << " files, " << lines << " lines, " << tokens << " tokens\n";
}

// One scratch buffer per thread: concurrent calls give the single-threaded result.
TEST(TokenizerTest, ConcurrentCallsAgree) {
  const std::string text = "Straße ＡＢＣ e\u0301 日本語のテキスト don't ١٢٣ \xff naïve ";
  std::string big;
  for (int k = 0; k < 200; ++k) big += text;
  const auto want = Tok(big);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      int n = 0;
      for (int k = 0; k < 50; ++k) n += Tok(big) == want;
      ok[t] = n;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 50) << "thread " << t;
}

TEST(TokenizerTest, StopWordsAreSingleTokens) {
  for (const auto& w : EnglishStopWords()) EXPECT_EQ(Tok(w), std::vector<std::string>{w}) << w;
}

}  // namespace
}  // namespace tributary
