"""Examples for cascade; a package only so that `examples.demo.calc` is a dotted module path from the root."""
