/* Built with pkg-config flags only: the C API is usable from plain C99. */
#include <stdio.h>
#include <tidegate/tidegate.h>

int main(void) {
  int64_t offset = 0, length = 0;
  if (tidegate_block_range(10, 4, 1, &offset, &length) != TIDEGATE_OK) return 1;
  if (offset != 3 || length != 3) return 1;
  printf("c consumer ok (tidegate %s, %s)\n", tidegate_version(),
         tidegate_status_string(TIDEGATE_ERR_TIMEOUT));
  return 0;
}
