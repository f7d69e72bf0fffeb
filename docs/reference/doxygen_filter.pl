#!/usr/bin/perl
# Doxygen's INPUT_FILTER for the public headers (docs/reference/Doxyfile).
#
# The headers are commented in the Google style, with plain // comments. This
# filter hands Doxygen the same text with those comments as documentation,
# without changing the files:
#
#   - the opening comment block of a header becomes its @file documentation;
#   - a whole-line comment in a namespace, class, struct or enum (not inside a
#     function body) becomes a /// comment for the declaration after it;
#   - a trailing comment on a member or enumerator line becomes ///<, and so
#     do the comment lines aligned under it that continue it;
#   - indented comment lines (two spaces or more after //: usage examples,
#     lists of codes) become @code blocks, so they render as written;
#   - section rules (// ---- Name ----) and comments inside function bodies
#     stay plain comments.
#
# Line numbers are kept (one line out per line in), so Doxygen's warnings
# point at the real file and line.
#
#   perl docs/reference/doxygen_filter.pl redlock/client.h
use strict;
use warnings;

my @lines = <>;
chomp @lines;

# The code part of a line with its string and character literals blanked,
# and the column of its trailing comment (-1 when none).
sub split_code {
  my ($line) = @_;
  my $code = $line;
  $code =~ s/"(?:[^"\\]|\\.)*"/'"' . (' ' x (length($&) - 2)) . '"'/ge;
  $code =~ s/'(?:[^'\\]|\\.)*'/"'" . (' ' x (length($&) - 2)) . "'"/ge;
  my $col = index($code, '//');
  return ($col < 0 ? $code : substr($code, 0, $col), $col);
}

my @out;
my $i = 0;

# 1. The opening comment block: the file's documentation.
my @head;
while ($i < @lines && $lines[$i] =~ m{^//}) {
  push @head, $lines[$i];
  $i++;
}

# Converts a run of whole-line comments (same indentation) to /// lines.
# Indented lines (two spaces or more after //) become @code blocks: C++ when
# a line of the block looks like code, unparsed otherwise (lists of codes,
# messages). @code goes at the end of the line before the block, so the
# block keeps its indentation; @endcode at the end of its last line. Returns
# as many lines as it got.
sub doc_block {
  my ($marker, @run) = @_;
  my @text = map { (m{^\s*//(.*)$})[0] } @run;
  my @indented = map { m{^ {2,}\S} ? 1 : 0 } @text;
  my @res;
  for my $k (0 .. $#run) {
    my ($indent) = $run[$k] =~ m{^(\s*)};
    my $t = $text[$k];
    if (!$indented[$k]) {
      # Prose: nothing in it is meant as a Doxygen command or HTML tag
      # (Redis ACL categories such as @scripting, <placeholders>, \r\n).
      $t =~ s/^ //;
      $t =~ s{([\\@])}{\\$1}g;
      $t =~ s{<(?=[A-Za-z/])}{\\<}g;
    }
    push @res, "$indent$marker" . ($t eq '' ? '' : " $t");
  }
  my $k = 0;
  while ($k < @run) {
    if (!$indented[$k]) {
      $k++;
      next;
    }
    my $last = $k;
    $last++ while $last < $#run && $indented[$last + 1];
    my $is_code = grep { m{[;{}]\s*(//.*)?$} } @text[$k .. $last];
    my $open = $is_code ? '@code' : '@code{.unparsed}';
    if ($k > 0) {
      $res[$k - 1] .= " $open";
    } else {
      $res[$k] =~ s{^(\s*$marker) +}{$1 $open };
    }
    $res[$last] .= ' @endcode';
    $k = $last + 1;
  }
  return @res;
}

if (@head) {
  my @doc = doc_block('///', @head);
  # "// redlock/client.h: what it is" names the file: @file takes that name;
  # otherwise the block ends with a bare @file (this file).
  unless ($doc[0] =~ s{^/// ([\w/.]+\.h): }{/// \@file $1 }) {
    $doc[-1] .= ' @file';
  }
  push @out, @doc;
}

# 2. The rest, tracking whether we are in a scope that declares things
# (namespace, class, struct, union, enum) or in a body (function, lambda,
# initializer).
my @scopes;       # 'decl' or 'body', one per open brace
my $pending = ''; # the code since the last ; { or }
my $trail_col = -1;  # column of the previous line's trailing comment

sub in_body { return scalar grep { $_ eq 'body' } @scopes; }

while ($i < @lines) {
  my $line = $lines[$i];
  my ($code, $col) = split_code($line);
  if ($code =~ m{^\s*$} && $col >= 0) {
    # A whole-line comment: gather the run of them at this indentation.
    my ($indent) = $line =~ m{^(\s*)};
    if (!in_body() && $trail_col >= 0 && $col == $trail_col) {
      # Continues the trailing comment of the line above.
      push @out, $line =~ s{//}{///<}r;
      $i++;
      next;
    }
    my @run;
    while ($i < @lines && $lines[$i] =~ m{^\Q$indent\E//}) {
      push @run, $lines[$i];
      $i++;
    }
    $trail_col = -1;
    if (in_body()) {
      push @out, @run;
      next;
    }
    # Section rules, and the comments that are no documentation, stay plain;
    # the comment under a rule documents the next declaration.
    my $rule = qr{^\s*//\s*(-{3,}|={3,}|NOLINT|clang-format|namespace\b)};
    push @out, shift @run while @run && $run[0] =~ $rule;
    push @out, doc_block('///', @run) if @run;
    next;
  }
  # Code, maybe with a trailing comment.
  if ($col >= 0 && !in_body() && substr($line, $col, 3) ne '///' &&
      $code =~ m{[;,]\s*$|^\s*k\w+\s*(=\s*\S+)?\s*$} && $code !~ m{^\s*#}) {
    my $text = substr($line, $col + 2);
    $line = substr($line, 0, $col) . '///<' . $text;
    $trail_col = $col;
  } else {
    $trail_col = -1;
  }
  push @out, $line;
  # Preprocessor lines (and their continuations) open no scope.
  if ($code =~ m{^\s*#} || ($i > 0 && $lines[$i - 1] =~ m{\\$} && $lines[$i - 1] =~ m{^\s*#})) {
    $i++;
    next;
  }
  # Braces of this line.
  for my $ch (split //, $code) {
    if ($ch eq '{') {
      push @scopes, ($pending =~ m{\b(namespace|class|struct|union|enum)\b} && $pending !~ m{[(=]})
                    ? 'decl' : 'body';
      $pending = '';
    } elsif ($ch eq '}') {
      pop @scopes;
      $pending = '';
    } elsif ($ch eq ';') {
      $pending = '';
    } else {
      $pending .= $ch;
    }
  }
  $pending .= ' ';
  $i++;
}

print "$_\n" for @out;
