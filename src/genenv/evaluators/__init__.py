"""The official benchmarks' evaluators (API-Bank, BFCL, Bamboogle, TravelPlanner, ALFWorld): loaders and scorers for
their files in their official formats, written from each benchmark's spec. (The top-level benchmarks/ folder holds
scripts that measure genenv itself: speed, memory, paired arms.)"""
