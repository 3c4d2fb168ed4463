// Placeholder so the library exists before its first source lands; delete when adding real code.
namespace oxi {}
