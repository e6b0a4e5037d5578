#include "tributary/tokenizer.h"

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace tributary {

void Tokenize(std::string_view text, std::vector<std::string>* tokens) {
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
