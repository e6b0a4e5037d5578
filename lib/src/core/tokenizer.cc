#include "tributary/tokenizer.h"

#include <utf8proc.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tributary {
namespace {

// Normalisation is NFKC_Casefold, done one code point at a time rather than
// with utf8proc_map() on the whole text, because utf8proc_map() refuses the
// whole text at its first invalid byte (only that byte should be dropped),
// mallocs its result on every call, and would make ASCII text, which needs none
// of it, pay for it. Each code point is decomposed (compatibility
// decomposition with case folding and default-ignorables removed: the flags of
// NFKC_Casefold minus COMPOSE), the decomposed code points are classified, and
// each word is put in canonical order and composed when it ends. Reordering and
// composition never need to cross a word boundary: what separates words has
// combining class 0 and does not compose with what follows it into a letter, so
// every token is the NFKC_Casefold of itself (tests/tokenizer_test.cc checks
// it for every code point).
constexpr auto kDecomposeOptions = static_cast<utf8proc_option_t>(
    UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT | UTF8PROC_CASEFOLD | UTF8PROC_IGNORE);
constexpr auto kComposeOptions = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
// The longest decomposition in utf8proc 2.8 (Unicode 15) is 18 code points (U+FDFA).
constexpr utf8proc_ssize_t kMaxDecomposition = 32;

// What a (decomposed, case-folded) code point is to the word splitter.
enum class CharClass : uint8_t {
  kSeparator,   // ends the current word and is dropped
  kMark,        // M*: continues the current word; dropped when there is none
  kWord,        // L*, N* of scripts written with spaces, and every decimal digit
  kKatakana,    // Katakana letters: a run is a word (UAX #29 rule WB13)
  kSingleChar,  // letters of scripts written without spaces: one word each
};

// ASCII: a-z, A-Z, 0-9 are word bytes (index 0x80..0xff: never looked up).
constexpr std::array<bool, 128> MakeAsciiWord() {
  std::array<bool, 128> t{};
  for (int c = 0; c < 128; ++c) t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  return t;
}
constexpr std::array<bool, 128> kAsciiWord = MakeAsciiWord();

inline char AsciiLower(unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c); }

// Scripts that do not put spaces between words: each letter is a word. The
// ranges are whole Unicode blocks; only their letters and non-decimal numbers
// get here (see Classify). Hangul is written with spaces and is not here.
bool InSingleCharScript(int32_t c) {
  if (c < 0x0E00) return false;
  return (c <= 0x0EFF) ||                   // Thai, Lao
         (c >= 0x1000 && c <= 0x109F) ||    // Myanmar
         (c >= 0x1780 && c <= 0x17FF) ||    // Khmer
         (c >= 0x19E0 && c <= 0x19FF) ||    // Khmer Symbols
         (c >= 0x3000 && c <= 0x309F) ||    // CJK Symbols (々 〆 〇 〡..〩), Hiragana
         (c >= 0x3400 && c <= 0x4DBF) ||    // CJK Unified Ideographs Extension A
         (c >= 0x4E00 && c <= 0x9FFF) ||    // CJK Unified Ideographs
         (c >= 0xA9E0 && c <= 0xA9FF) ||    // Myanmar Extended-B
         (c >= 0xAA60 && c <= 0xAA7F) ||    // Myanmar Extended-A
         (c >= 0xF900 && c <= 0xFAFF) ||    // CJK Compatibility Ideographs (those NFKC keeps)
         (c >= 0x1B000 && c <= 0x1B16F) ||  // Kana Supplement, Extended-A, Small Kana (mostly hentaigana)
         (c >= 0x20000 && c <= 0x3FFFF);    // CJK Unified Ideographs Extensions B..H, Compatibility Supplement
}

bool IsKatakana(int32_t c) {
  return (c >= 0x30A0 && c <= 0x30FF) || (c >= 0x31F0 && c <= 0x31FF) || (c >= 0x1AFF0 && c <= 0x1AFFF);
}

CharClass Classify(int32_t c) {
  if (c < 0x80) return kAsciiWord[c] ? CharClass::kWord : CharClass::kSeparator;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      if (InSingleCharScript(c)) return CharClass::kSingleChar;
      return IsKatakana(c) ? CharClass::kKatakana : CharClass::kWord;
    case UTF8PROC_CATEGORY_ND:  // Thai, Khmer, ... digits too: a number stays one token
      return CharClass::kWord;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      return CharClass::kMark;
    default:
      return CharClass::kSeparator;
  }
}

// Khmer COENG and Myanmar VIRAMA write the next consonant below the previous
// one: the stacked consonant belongs to the same character cluster. (Whether
// one is among the marks since the last letter, not whether it is the last
// mark: canonical ordering may move it, and a token must tokenize to itself.)
bool IsStackingVirama(int32_t c) { return c == 0x17D2 || c == 0x1039; }

// The word being built, as decomposed code points. One per thread (Tokenize
// is called from many threads at once): its buffers keep their capacity, so
// tokenizing allocates only the strings it appends.
class WordBuilder {
 public:
  void Reset() {
    cps_.clear();
    needs_compose_ = false;
    stacking_ = false;
  }

  bool empty() const { return cps_.empty(); }
  CharClass word_class() const { return class_; }

  // Starts a word with the ASCII word bytes [s, s + n) (REQUIRES: empty()).
  void StartAscii(const unsigned char* s, size_t n) {
    for (size_t k = 0; k < n; ++k) cps_.push_back(static_cast<unsigned char>(AsciiLower(s[k])));
    class_ = CharClass::kWord;
  }

  // Adds ASCII word byte c to the current word of class kWord.
  void AddAscii(unsigned char c) {
    cps_.push_back(static_cast<unsigned char>(AsciiLower(c)));
    stacking_ = false;
  }

  // Adds the NFKC_Casefold decomposition of code point c.
  void AddCodePoint(int32_t c, std::vector<std::string>* tokens) {
    utf8proc_int32_t d[kMaxDecomposition];
    int boundclass = 0;  // unused without UTF8PROC_CHARBOUND
    const utf8proc_ssize_t n = utf8proc_decompose_char(c, d, kMaxDecomposition, kDecomposeOptions, &boundclass);
    if (n < 0 || n > kMaxDecomposition) {  // not with Unicode 15's data; a separator rather than a crash
      Flush(tokens);
      return;
    }
    for (utf8proc_ssize_t k = 0; k < n; ++k) Add(d[k], Classify(d[k]), tokens);
  }

  // Appends the current word (if any) to *tokens and starts a new one.
  void Flush(std::vector<std::string>* tokens) {
    if (cps_.empty()) return;
    auto n = static_cast<utf8proc_ssize_t>(cps_.size());
    if (needs_compose_) {
      CanonicalOrder();
      const utf8proc_ssize_t composed = utf8proc_normalize_utf32(cps_.data(), n, kComposeOptions);
      if (composed >= 0) n = composed;  // < 0 only for invalid options
    }
    utf8_.clear();
    for (utf8proc_ssize_t k = 0; k < n; ++k) {
      utf8proc_uint8_t b[4];
      const utf8proc_ssize_t len = utf8proc_encode_char(cps_[k], b);
      utf8_.append(reinterpret_cast<const char*>(b), static_cast<size_t>(len));
    }
    tokens->push_back(utf8_);
    Reset();
  }

 private:
  void Add(int32_t c, CharClass cls, std::vector<std::string>* tokens) {
    switch (cls) {
      case CharClass::kSeparator:
        Flush(tokens);
        return;
      case CharClass::kMark:
        if (cps_.empty()) return;  // a mark with nothing to attach to
        break;
      case CharClass::kWord:
      case CharClass::kKatakana:
        if (!cps_.empty() && class_ != cls) Flush(tokens);
        class_ = cls;
        break;
      case CharClass::kSingleChar:
        if (!cps_.empty() && !(class_ == cls && stacking_)) Flush(tokens);
        class_ = cls;
        break;
    }
    stacking_ = cls == CharClass::kMark ? stacking_ || IsStackingVirama(c) : false;
    // Only code points >= U+0300 compose or have a non-zero combining class.
    if (c >= 0x300) needs_compose_ = true;
    cps_.push_back(c);
  }

  // Canonical ordering (stable sort of each run of non-starters by combining
  // class), as utf8proc_decompose_custom() does it; utf8proc_normalize_utf32()
  // expects it done.
  void CanonicalOrder() {
    for (size_t pos = 0; pos + 1 < cps_.size();) {
      const auto ccc1 = utf8proc_get_property(cps_[pos])->combining_class;
      const auto ccc2 = utf8proc_get_property(cps_[pos + 1])->combining_class;
      if (ccc1 > ccc2 && ccc2 > 0) {
        std::swap(cps_[pos], cps_[pos + 1]);
        if (pos > 0) {
          --pos;
        } else {
          ++pos;
        }
      } else {
        ++pos;
      }
    }
  }

  std::vector<utf8proc_int32_t> cps_;
  CharClass class_ = CharClass::kWord;
  bool needs_compose_ = false;
  bool stacking_ = false;  // a stacking virama since the last letter or number
  std::string utf8_;
};

}  // namespace

void Tokenize(std::string_view text, std::vector<std::string>* tokens) {
  thread_local WordBuilder word;
  word.Reset();  // in case a previous call ended in an exception (bad_alloc)
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (!kAsciiWord[c]) {
        word.Flush(tokens);
        ++i;
      } else if (!word.empty() && word.word_class() == CharClass::kWord) {
        word.AddAscii(c);  // ASCII inside a word that has non-ASCII in it ("naïve")
        ++i;
      } else {
        // The fast path: a run of ASCII letters and digits followed by an ASCII
        // separator or the end is a finished token.
        word.Flush(tokens);
        size_t j = i + 1;
        while (j < n && p[j] < 0x80 && kAsciiWord[p[j]]) ++j;
        if (j == n || p[j] < 0x80) {
          tokens->emplace_back(text.data() + i, j - i);
          for (char& ch : tokens->back()) ch = AsciiLower(static_cast<unsigned char>(ch));
        } else {
          word.StartAscii(p + i, j - i);  // it may go on: "Straße", "e\u0301"
        }
        i = j;
      }
      continue;
    }
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(n - i), &cp);
    if (len < 0) {  // not valid UTF-8 (stray, truncated, overlong, surrogate, > U+10FFFF): a separator
      word.Flush(tokens);
      ++i;
      continue;
    }
    i += static_cast<size_t>(len);
    word.AddCodePoint(cp, tokens);
  }
  word.Flush(tokens);
}

const char* TokenizerUnicodeVersion() { return utf8proc_unicode_version(); }

const std::unordered_set<std::string>& EnglishStopWords() {
  // NLTK's English list, without the forms containing an apostrophe (Tokenize
  // splits them: "don't" -> "don", "t", both of which are in the list).
  static const auto* const words = new std::unordered_set<std::string>{
      "i",       "me",       "my",         "myself",  "we",     "our",    "ours",    "ourselves", "you",        "your",
      "yours",   "yourself", "yourselves", "he",      "him",    "his",    "himself", "she",       "her",        "hers",
      "herself", "it",       "its",        "itself",  "they",   "them",   "their",   "theirs",    "themselves", "what",
      "which",   "who",      "whom",       "this",    "that",   "these",  "those",   "am",        "is",         "are",
      "was",     "were",     "be",         "been",    "being",  "have",   "has",     "had",       "having",     "do",
      "does",    "did",      "doing",      "a",       "an",     "the",    "and",     "but",       "if",         "or",
      "because", "as",       "until",      "while",   "of",     "at",     "by",      "for",       "with",       "about",
      "against", "between",  "into",       "through", "during", "before", "after",   "above",     "below",      "to",
      "from",    "up",       "down",       "in",      "out",    "on",     "off",     "over",      "under",      "again",
      "further", "then",     "once",       "here",    "there",  "when",   "where",   "why",       "how",        "all",
      "any",     "both",     "each",       "few",     "more",   "most",   "other",   "some",      "such",       "no",
      "nor",     "not",      "only",       "own",     "same",   "so",     "than",    "too",       "very",       "s",
      "t",       "can",      "will",       "just",    "don",    "should", "now",     "d",         "ll",         "m",
      "o",       "re",       "ve",         "y",       "ain",    "aren",   "couldn",  "didn",      "doesn",      "hadn",
      "hasn",    "haven",    "isn",        "ma",      "mightn", "mustn",  "needn",   "shan",      "shouldn",    "wasn",
      "weren",   "won",      "wouldn",
  };
  return *words;
}

}  // namespace tributary
