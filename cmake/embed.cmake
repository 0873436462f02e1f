# Writes INPUT as a NUL-terminated C array to OUTPUT (cmake -P).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR len "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}"
  "/* Generated from config/fanhub.yaml; do not edit. */\n"
  "#include <stddef.h>\n"
  "const char fh_config_default_yaml[] = {\n${bytes}0x00};\n"
  "const size_t fh_config_default_yaml_len = ${len};\n")
