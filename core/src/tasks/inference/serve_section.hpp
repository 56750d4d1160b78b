#pragma once
// Config section `serve` (serve_settings.hpp) for task inference's schema.
#include "polyhal/app/config_schema.hpp"
#include "polyhal/app/serve_settings.hpp"

namespace polyhal {

ConfigSection serve_section();

}  // namespace polyhal
