# core_layers: no two files of libgrpo call each other in a circle (scripts/check_layers.sh reads
# the defined and undefined symbols of the built objects with nm).
add_test(NAME core_layers
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_layers.sh ${PROJECT_BINARY_DIR} core/)
