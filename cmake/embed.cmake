# embed.cmake - writes a C file holding the bytes of one file, so that a data file the binary
# needs (flows/flow.rng) is compiled in from its one source, never from a hand-kept copy.
#
#   cmake -DIN=file -DOUT=file.c -DNAME=symbol -DLABEL=text -P embed.cmake
#
# defines `const unsigned char NAME[]` (the bytes plus a terminating NUL) and
# `const size_t NAME_len` (the byte count without the NUL). A byte array rather than a string
# literal: C11 only promises 4095-character literals, and -Wpedantic says so.
if(NOT IN OR NOT OUT OR NOT NAME)
  message(FATAL_ERROR "embed.cmake: IN, OUT and NAME are required")
endif()
if(NOT LABEL)
  set(LABEL "${NAME}")
endif()
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR len "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPEAT "0x[0-9a-f][0-9a-f]," 12 row)
string(REGEX REPLACE "(${row})" "\\1\n    " bytes "${bytes}")
set(text "/* Generated from ${LABEL} by cmake/embed.cmake at build time: do not edit. */\n")
string(APPEND text "#include <stddef.h>\n\n")
string(APPEND text "extern const unsigned char ${NAME}[];\n")
string(APPEND text "extern const size_t ${NAME}_len;\n\n")
string(APPEND text "const unsigned char ${NAME}[] = {\n    ${bytes}0x00};\n")
string(APPEND text "const size_t ${NAME}_len = ${len};\n")
file(WRITE "${OUT}" "${text}")
