# core_layers: core/ is layered (no call or include up a layer, no two files calling each other in
# a circle; scripts/check_layers.sh reads the symbols of the built objects with nm).
add_test(NAME core_layers
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_layers.sh ${PROJECT_BINARY_DIR} core/)
