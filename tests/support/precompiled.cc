// The target that owns the tests' precompiled header (tests/CMakeLists.txt); it is built only
// so that the header is compiled once, with the flags every test executable shares.
int main() { return 0; }
