# Warnings are on for every tidegate target; TIDEGATE_WARNINGS_AS_ERRORS (set in CI) makes
# them fatal.
function(tidegate_enable_warnings TARGET)
  target_compile_options(${TARGET} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers>
    $<$<AND:$<COMPILE_LANGUAGE:CXX,C>,$<BOOL:${TIDEGATE_WARNINGS_AS_ERRORS}>>:-Werror>)
endfunction()
