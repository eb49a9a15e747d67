#include "tests/ops/kernel_test_util.h"
